"""Wall-clock accumulators for the env's `profile=True` mode (bench/bench_env.py reads them)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from cm_gym.core.types import Action, AgentState, Outcome
from cm_gym.llm.base import Completion

PHASES = ("llm", "evaluator", "retrieval", "features", "total")


class Timings:
    """Seconds spent per phase and call counts; `share()` gives each phase's fraction of total."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def add(self, phase: str, seconds: float) -> None:
        """Charge `seconds` to `phase` (one call)."""
        self.seconds[phase] += seconds
        self.calls[phase] += 1

    @contextmanager
    def time(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - start)

    def share(self) -> dict[str, float]:
        total = self.seconds.get("total", 0.0)
        return {p: (self.seconds[p] / total if total else 0.0) for p in PHASES if p != "total"}

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": dict(self.seconds), "calls": dict(self.calls), "share": self.share()}

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


class TimedLLM:
    """Forwards to an LLM, adding the call's wall time to phase "llm"."""

    def __init__(self, inner: Any, timings: Timings) -> None:
        self.inner, self.timings = inner, timings
        self.name = getattr(inner, "name", "llm")

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        with self.timings.time("llm"):
            return self.inner.complete(template, fields)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)


class TimedEvaluator:
    """Forwards to an Evaluator, adding the check's wall time to phase "evaluator"."""

    def __init__(self, inner: Any, timings: Timings) -> None:
        self.inner, self.timings = inner, timings

    def check(self, state: AgentState, action: Action) -> Outcome:
        with self.timings.time("evaluator"):
            return self.inner.check(state, action)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)
