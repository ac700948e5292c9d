"""`make_llm`: one place that turns a backend spec (and an optional cache) into an `LLM`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cm_gym.llm.base import LLM
from cm_gym.llm.errors import LLMError

SPECS = ("simulated", "openai")


def make_llm(
    spec: str = "simulated",
    *,
    seed: int = 0,
    cache_path: str | Path | None = None,
    cache_mode: str = "rw",
    task_lookup: Any = None,
    **kw: Any,
) -> LLM:
    """Build an LLM backend.

    `spec` is "simulated" (the built-in simulator; `task_lookup` resolves task ids when only
    string fields reach it) or "openai" / "openai:<model>" (an OpenAI-compatible endpoint; base URL,
    model and key from `kw` or OPENAI_BASE_URL, CM_GYM_MODEL / OPENAI_MODEL, OPENAI_API_KEY; the
    seed is sent as the sampling seed). With `cache_path` (``"default"`` = the user cache folder)
    and a `cache_mode` other than "off", the backend is wrapped in a `CachedLLM`.
    """
    kind, _, model = spec.partition(":")
    llm: LLM
    if kind == "simulated":
        from cm_gym.llm.simulated import SimulatedLLM

        llm = SimulatedLLM(seed=seed, task_lookup=task_lookup, **kw)
    elif kind == "openai":
        from cm_gym.llm.openai_client import OpenAICompatibleLLM

        if model:
            kw.setdefault("model", model)
        kw.setdefault("seed", seed)
        llm = OpenAICompatibleLLM(**kw)
    else:
        raise LLMError(f"unknown LLM spec {spec!r}; use one of {', '.join(SPECS)} (or openai:<model>)")
    if cache_path is None or cache_mode == "off":
        return llm
    from cm_gym.llm.cache import CachedLLM, ResponseCache

    if str(cache_path) == "default":
        from cm_gym.paths import cache_dir

        cache_path = cache_dir("llm") / "responses.sqlite"
    return CachedLLM(llm, ResponseCache(cache_path, cache_mode))
