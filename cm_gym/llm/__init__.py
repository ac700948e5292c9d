"""LLM layer: protocol, prompt templates, OpenAI-compatible client, response cache, simulator,
recorded real outputs.

The heavier modules (the `openai` client, the server) are imported on first use, so domain
plugins that import `cm_gym.llm.base` stay cheap to load.
"""

from __future__ import annotations

import importlib
from typing import Any

from cm_gym.llm.base import LLM, Completion, estimate_tokens
from cm_gym.llm.errors import (
    CacheConflictError,
    CacheCorruptError,
    CacheError,
    CacheLockedError,
    CacheMissError,
    CacheWriteError,
    LLMError,
    LLMUnreachableError,
    PromptError,
)

_LAZY = {
    "CachedLLM": "cm_gym.llm.cached",
    "ResponseCache": "cm_gym.llm.cache",
    "OpenAICompatibleLLM": "cm_gym.llm.openai_client",
    "SimulatedLLM": "cm_gym.llm.simulated",
    "RecordedLLM": "cm_gym.llm.recorded",
    "make_llm": "cm_gym.llm.factory",
    "with_cache": "cm_gym.llm.factory",
    "serve_in_thread": "cm_gym.llm.server",
    "render_messages": "cm_gym.llm.prompts",
    "render_record": "cm_gym.llm.prompts",
    "parse_rendered": "cm_gym.llm.prompts",
}

__all__ = [
    "LLM",
    "CacheConflictError",
    "CacheCorruptError",
    "CacheError",
    "CacheLockedError",
    "CacheMissError",
    "CacheWriteError",
    "Completion",
    "LLMError",
    "LLMUnreachableError",
    "PromptError",
    "estimate_tokens",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cm_gym.llm' has no attribute {name!r}")
