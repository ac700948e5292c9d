"""Errors of the LLM layer. Each is a `CmGymError`, so the CLI reports it as one clear line."""

from __future__ import annotations

from cm_gym.types import CmGymError


class LLMError(CmGymError):
    """An LLM backend could not produce a completion (server down after retries, empty choice
    list, no content, misconfiguration, a task the simulator cannot resolve)."""


class PromptError(LLMError):
    """A template name is unknown, or chat messages were not rendered by a cm_gym template."""


class CacheError(LLMError):
    """Base class of response-cache errors."""


class CacheMissError(CacheError):
    """Read-only cache mode and the request is not in the cache (exact replay is impossible)."""


class CacheCorruptError(CacheError):
    """The cache file is truncated, corrupt, or not a cm_gym response cache."""
