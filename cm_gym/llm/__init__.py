"""LLM layer: protocol, prompt templates, OpenAI-compatible client, response cache, simulator."""

from cm_gym.llm.base import LLM, Completion, estimate_tokens

__all__ = ["LLM", "Completion", "estimate_tokens"]
