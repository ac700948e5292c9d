"""Errors of the LLM layer. Each is a `CmGymError`, so the CLI reports it as one clear line."""

from __future__ import annotations

from cm_gym.core.types import CmGymError


class LLMError(CmGymError):
    """An LLM backend could not produce a completion (server down after retries, empty choice
    list, no content, misconfiguration, a task the simulator cannot resolve)."""


class LLMUnreachableError(LLMError):
    """The endpoint refused the very first connection: the server is not running (or the URL is
    wrong). Raised at once, without retries, unless the answer is in the response cache."""


class LLMTimeoutError(LLMError):
    """A call waited longer than the client timeout for its reply. It is never re-sent (the
    server may still be computing it); the message names the limit and the flag."""


class PromptError(LLMError):
    """A template name is unknown, or chat messages were not rendered by a cm_gym template."""


class CacheError(LLMError):
    """Base class of response-cache errors."""


class CacheMissError(CacheError):
    """Read-only cache mode and the request is not in the cache (exact replay is impossible)."""


class CacheCorruptError(CacheError):
    """The cache file is truncated, corrupt, or not a cm_gym response cache."""


class CacheLockedError(CacheError):
    """Another process held the cache's write lock for longer than the busy timeout (and the
    retries). Nothing is corrupt: retry, or give each process its own cache and merge them."""


class CacheWriteError(CacheError):
    """A write to the cache failed for a reason outside cm_gym (disk full, file or folder not
    writable, I/O error). Everything committed before is intact."""


class CacheConflictError(CacheError):
    """`cm-gym cache import` found entries whose key is already cached with a different reply."""


#: Errors a caller must never turn into a documented fallback (rule-based edits, rule-based
#: distillation): a read-only replay that lacks a reply, a cache that cannot be used, a server that
#: is not running, a server slower than the client timeout. Falling back would silently build
#: other memory than the recorded run did.
FATAL_LLM_ERRORS: tuple[type[LLMError], ...] = (CacheError, LLMUnreachableError, LLMTimeoutError)
