"""`make_llm`: one place that turns a backend spec (and its response cache) into an `LLM`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cm_gym.llm.base import LLM
from cm_gym.llm.errors import CacheError, LLMError

SPECS = ("simulated", "openai", "recorded", "local")
CACHE_MODES = ("rw", "ro", "off")


def make_llm(
    spec: str = "simulated",
    *,
    seed: int = 0,
    cache_path: str | Path | None = None,
    cache_mode: str = "rw",
    concurrency: int | None = None,
    task_lookup: Any = None,
    timeout: float | None = None,
    max_tokens: int | None = None,
    retries: int | None = None,
    **kw: Any,
) -> LLM:
    """Build an LLM backend and put it behind the response cache.

    `spec` is "simulated" (the built-in simulator; `task_lookup` resolves task ids when only
    string fields reach it), "openai" / "openai:<model>" (an OpenAI-compatible endpoint; base URL,
    model and key from `kw` or OPENAI_BASE_URL, CM_GYM_MODEL / OPENAI_MODEL, OPENAI_API_KEY; the
    seed is sent as the sampling seed). "simulated:<profile>": the simulator with an error model
    fitted to a real system (`cm_gym.llm.profiles`); "simulated:default" is plain "simulated".
    "local:<model>": a real coder model on this machine's CPUs (`cm_gym.llm.local_llm`: llama.cpp
    engines started on the first live call; `kw` may carry ``engines``, ``threads``,
    ``prompt_cache``, ``attach``).
    "recorded:<system>": a real system's published outputs as drafts (the same system at every
    decision), the simulator where no real reply exists (`cm_gym.llm.recorded`; `kw` may carry the
    simulator's ``revision_rates`` and the outputs' ``root``); "recorded:<system>+cascade": later
    drafts climb the system's ladder of stronger published systems (a named option, never "None").

    Caching: every non-simulated backend goes through a `CachedLLM` — on `cache_path`, or the
    default file ``$CM_GYM_CACHE/llm/responses.sqlite`` when it is None or ``"default"`` (for
    "local:<model>": ``$CM_GYM_CACHE/llm/local-<model>.sqlite``, seeded with the replies of the
    real runs cm_gym ships, `cm_gym.llm.shipped`, so "ro" replays them with no engine) — unless
    `cache_mode` is "off". "ro" replays only (a miss is a `CacheMissError`, never a call). The
    simulated and the recorded LLM (both local and free) are cached only when `cache_path` is given. `concurrency` bounds the parallel
    calls of `CachedLLM.prefetch`.

    Client limits of a real endpoint (`cm_gym.llm.limits`): `timeout` (seconds per call),
    `max_tokens` (per reply; part of the cache key), `retries`, `concurrency` — None takes
    ``CM_GYM_LLM_TIMEOUT`` / ``_MAX_TOKENS`` / ``_RETRIES`` / ``_CONCURRENCY``, else the defaults
    (60 s, 1024, 4, 8). The simulator ignores timeout, max_tokens and retries.
    """
    if cache_mode not in CACHE_MODES:
        raise CacheError(f"LLM cache mode must be one of {', '.join(CACHE_MODES)}, got {cache_mode!r}")
    kind, _, model = spec.partition(":")
    llm: LLM
    if kind == "simulated":
        from cm_gym.llm.simulated import SimulatedLLM

        llm = SimulatedLLM(seed=seed, task_lookup=task_lookup, profile=model or None, **kw)
        if cache_path is None:
            return llm
    elif kind == "recorded":
        from cm_gym.llm.recorded import RecordedLLM

        llm = RecordedLLM(model, seed=seed, task_lookup=task_lookup, **kw)
        if cache_path is None:
            return llm
    elif kind == "openai":
        from cm_gym.llm.openai_client import OpenAICompatibleLLM

        if model:
            kw.setdefault("model", model)
        kw.setdefault("seed", seed)
        if retries is not None:
            kw["max_retries"] = retries
        llm = OpenAICompatibleLLM(timeout=timeout, max_tokens=max_tokens, **kw)
    elif kind == "local":
        from cm_gym.llm.gguf_models import MODELS
        from cm_gym.llm.local_llm import LocalLLM

        if not model:
            raise LLMError(f"local needs a model: local:<model> with one of {', '.join(MODELS)}")
        llm = LocalLLM(model, seed=seed, timeout=timeout, retries=retries, **kw)
        if cache_mode != "off" and (cache_path is None or str(cache_path) == "default"):
            from cm_gym.llm.shipped import shipped_cache

            cache_path = shipped_cache(model)  # the default cache holds the replies cm_gym ships
    else:
        raise LLMError(
            f"unknown LLM spec {spec!r}; use simulated, openai, openai:<model>, recorded:<system> "
            "or local:<model>"
        )
    return with_cache(llm, cache_path, cache_mode, concurrency=concurrency)


def needs_task_lookup(spec: str) -> bool:
    """Whether the backend of `spec` answers from the task (the simulator, the recorded LLM): it
    then needs a task lookup to serve string-only requests (the HTTP server)."""
    return spec.partition(":")[0] in ("simulated", "recorded")


def with_cache(
    llm: LLM, cache_path: str | Path | None, cache_mode: str = "rw", *, concurrency: int | None = None
) -> LLM:
    """`llm` behind a `CachedLLM` on `cache_path` (None / "default": the default file), or `llm`
    itself when `cache_mode` is "off" or it is already cached."""
    from cm_gym.llm.cache import ResponseCache, resolve_cache_path
    from cm_gym.llm.cached import CachedLLM
    from cm_gym.llm.limits import limit

    if cache_mode == "off" or isinstance(llm, CachedLLM):
        return llm
    cache = ResponseCache(resolve_cache_path(cache_path), cache_mode)
    return CachedLLM(llm, cache, concurrency=int(limit("concurrency", concurrency)))
