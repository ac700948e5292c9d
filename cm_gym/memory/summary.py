"""What a memory build did (`BuildSummary`) and the timers that say where its time went."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import Action, AgentState, Evaluator, Outcome, check_all
from cm_gym.llm.base import Completion


@dataclass
class BuildSummary:
    """Counts of one `build_memory` run (a resumed run counts only its own work; the store keeps
    cumulative counters). Verification (alternatives, distillation) and solving (the base agent's
    decisions) are counted apart, as the paper's interaction accounting requires."""

    tasks: int = 0
    skipped: int = 0
    decisions: int = 0
    solved: int = 0
    failures_expanded: int = 0
    alternatives_checked: int = 0
    alternatives_llm: int = 0
    alternatives_rule: int = 0
    admitted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    evicted: int = 0
    reuse_uses: int = 0
    label_checks: int = 0  # memory-free drafts checked on forks to label reuse (not charged)
    reuse_labels: dict[str, int] = field(default_factory=lambda: {"helpful": 0, "neutral": 0, "harmful": 0})
    solving_calls: int = 0
    verification_calls: int = 0
    solving_llm_calls: int = 0
    verification_llm_calls: int = 0
    solving_tokens: int = 0
    verification_tokens: int = 0
    records: int = 0
    budget_exhausted: bool = False
    checkpoints: list[str] = field(default_factory=list)
    admitted_ids: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_counters(cls, counters: Mapping[str, float]) -> BuildSummary:
        """The counts of every session of a store's build, from its cumulative counters
        (`RecordStore.counters`): what a resumed build reports as the build's summary, where the
        summary of its last session alone would say "0 tasks, 12 skipped"."""
        out = cls()
        for f in fields(cls):
            value = getattr(out, f.name)
            if f.name in counters and isinstance(value, int) and not isinstance(value, bool):
                setattr(out, f.name, int(counters[f.name]))
        out.rejected = {
            k[len("rejected_") :]: int(v) for k, v in counters.items() if k.startswith("rejected_")
        }
        out.reuse_labels = {label: int(counters.get(f"reuse_{label}", 0)) for label in out.reuse_labels}
        return out

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def add_solving(self, cost: Cost) -> None:
        self.solving_calls += cost.evaluator_calls
        self.solving_llm_calls += cost.llm_calls
        self.solving_tokens += cost.tokens

    def add_verification(self, cost: Cost) -> None:
        self.verification_calls += cost.evaluator_calls
        self.verification_llm_calls += cost.llm_calls
        self.verification_tokens += cost.tokens

    @property
    def total_rejected(self) -> int:
        return sum(self.rejected.values())

    def counter_values(self) -> dict[str, float]:
        """Flat numeric counters (persisted cumulatively in the store's counters table)."""
        out: dict[str, float] = {}
        for key, value in asdict(self).items():
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or key in ("records", "skipped")
            ):
                continue
            out[key] = float(value)
        for reason, n in self.rejected.items():
            out[f"rejected_{reason}"] = float(n)
        for label, n in self.reuse_labels.items():
            out[f"reuse_{label}"] = float(n)
        return out

    def minus(self, before: Mapping[str, float]) -> dict[str, float]:
        """Counter increments since a `counter_values()` snapshot."""
        now = self.counter_values()
        return {k: v - before.get(k, 0.0) for k, v in now.items() if v - before.get(k, 0.0)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        """A human-readable multi-line summary (printed by `cm-gym build`)."""
        rej = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(self.rejected.items())) or "none"
        lab = self.reuse_labels
        lines = [
            f"tasks processed      {self.tasks} (skipped, already processed: {self.skipped}; solved {self.solved})",
            f"decisions            {self.decisions}",
            f"failures expanded    {self.failures_expanded}",
            f"alternatives checked {self.alternatives_checked} "
            f"(proposed by LLM {self.alternatives_llm}, by rules {self.alternatives_rule})",
            f"admitted             {self.admitted}",
            f"rejected             {self.total_rejected} ({rej})",
            f"evicted              {self.evicted}",
            f"reuse during build   {self.reuse_uses} uses "
            f"(helpful {lab['helpful']}, neutral {lab['neutral']}, harmful {lab['harmful']})",
            f"evaluator calls      solving {self.solving_calls}, verification {self.verification_calls}",
            f"LLM calls            solving {self.solving_llm_calls}, verification {self.verification_llm_calls}",
            f"tokens               solving {self.solving_tokens}, verification {self.verification_tokens}",
            f"records in store     {self.records}",
        ]
        if self.budget_exhausted:
            lines.append("verification budget  exhausted")
        if self.timings:
            total = self.timings.get("total", 0.0) or 1e-9
            parts = ", ".join(
                f"{k} {v:.2f}s ({100 * v / total:.0f}%)" for k, v in self.timings.items() if k != "total"
            )
            lines.append(f"time                 {self.timings.get('total', 0.0):.2f}s: {parts}")
        for path in self.checkpoints:
            lines.append(f"checkpoint           {path}")
        return "\n".join(lines)


class Timer:
    """Accumulates wall time per named bucket."""

    def __init__(self) -> None:
        self.buckets: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.buckets[name] = self.buckets.get(name, 0.0) + seconds

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)


class TimedLLM:
    """Wraps an LLM, charging its wall time to the "llm" bucket."""

    def __init__(self, inner: Any, timer: Timer) -> None:
        self.inner, self.timer = inner, timer
        self.name = getattr(inner, "name", type(inner).__name__)

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        with self.timer.time("llm"):
            return self.inner.complete(template, fields)


class TimedEvaluator:
    """Wraps an Evaluator, charging its wall time to the "evaluator" bucket."""

    def __init__(self, inner: Evaluator, timer: Timer) -> None:
        self.inner, self.timer = inner, timer

    def check(self, state: AgentState, action: Action) -> Outcome:
        with self.timer.time("evaluator"):
            return self.inner.check(state, action)

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        """`check_all` on the wrapped evaluator (parallel where it offers ``check_many``)."""
        with self.timer.time("evaluator"):
            return check_all(self.inner, state, actions)
