"""Real mistakes against the simulator's: one sample per source, and the distance between them.

An `ErrorSample` is what one source (a real system's published answers, or the simulated LLM's
first drafts under a profile) does on one benchmark's tasks: how many it solves (the memory-free
score at the first decision, i.e. the None policy with one decision) and, per failure, its
*kinds* in the domain's taxonomy (several per answer allowed), whether the difference from the
gold is one local edit, and whether one edit of the domain's edit grammar (`Domain.edit_operators`)
turns it into a passing answer (checked with the real world model).

The distance used to judge a simulator profile against a real system (`Distance`):

* ``tv`` — total-variation distance between the two *kind distributions*, where each failure
  spreads a mass of 1 evenly over its kinds (so the distribution sums to 1 whatever the number
  of kinds per answer): ``TV = ½ Σ_k |p_k − q_k|`` in [0, 1];
* ``none_gap`` — simulated − real memory-free score (percentage points);
* ``repair_gap`` — simulated − real share of failures that one grammar edit repairs (points).

The domain collectors: `cm_gym.studies.analysis.real_errors_spider` (SQL), `…_dafny`, `…_humaneval`;
`compare` runs one (domain, system) comparison for every requested profile.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cm_gym.core.types import Action, AgentState, Task

logger = logging.getLogger(__name__)

#: benchmark kind of the recordings → the cm_gym benchmark its tasks come from
BENCHMARKS: Mapping[str, str] = {"spider": "SpiderSQL", "dafny": "Dafny", "humaneval": "CodeHumanEval"}


@dataclass(frozen=True)
class Failure:
    """One wrong answer: its task key, kinds, whether it is one local edit from the gold, and
    whether one grammar edit repairs it (None: not checked)."""

    key: str
    kinds: tuple[str, ...]
    local: bool
    repairable: bool | None = None
    detail: str = ""
    subkinds: tuple[str, ...] = ()


@dataclass
class ErrorSample:
    """What one source does on a benchmark's tasks (see the module doc)."""

    domain: str
    source: str
    taxonomy: tuple[str, ...]
    n_tasks: int = 0
    n_solved: int = 0
    failures: list[Failure] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def none_score(self) -> float | None:
        """100 × solved / tasks: the memory-free score at the first decision."""
        return 100.0 * self.n_solved / self.n_tasks if self.n_tasks else None

    def mass(self, sub: bool = False) -> dict[str, float]:
        """Each kind's (or, with `sub`, sub-kind's) count of failures, every failure spreading 1
        evenly over its kinds: sums to the number of failures."""
        out: dict[str, float] = {} if sub else dict.fromkeys(self.taxonomy, 0.0)
        for f in self.failures:
            kinds = (f.subkinds or f.kinds if sub else f.kinds) or ("unclassified",)
            for k in kinds:
                out[k] = out.get(k, 0.0) + 1.0 / len(kinds)
        return out

    def distribution(self) -> dict[str, float]:
        """`mass` normalised to sum to 1 (all zeros without failures)."""
        total = sum(self.mass().values())
        return {k: v / total if total else 0.0 for k, v in self.mass().items()}

    def shares(self) -> dict[str, float]:
        """Share of failures that have each kind (multi-label; sums to more than 1)."""
        n = len(self.failures)
        counts = Counter(k for f in self.failures for k in f.kinds)
        return {k: counts.get(k, 0) / n if n else 0.0 for k in self.taxonomy}

    @property
    def local_share(self) -> float | None:
        """Share of failures one local edit away from the gold."""
        return sum(f.local for f in self.failures) / len(self.failures) if self.failures else None

    @property
    def repairable_share(self) -> float | None:
        """Share of the checked failures that one edit of the domain's grammar repairs."""
        checked = [f for f in self.failures if f.repairable is not None]
        return sum(bool(f.repairable) for f in checked) / len(checked) if checked else None

    @property
    def repair_checked(self) -> int:
        return sum(f.repairable is not None for f in self.failures)

    def as_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "source": self.source,
            "n_tasks": self.n_tasks,
            "n_solved": self.n_solved,
            "n_failures": len(self.failures),
            "none_score": self.none_score,
            "distribution": self.distribution(),
            "shares": self.shares(),
            "local_share": self.local_share,
            "repairable_share": self.repairable_share,
            "repair_checked": self.repair_checked,
            "notes": self.notes,
        }


def tv_distance(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Total-variation distance ½ Σ |p_k − q_k| over the union of kinds (0 = same, 1 = disjoint)."""
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


@dataclass(frozen=True)
class Distance:
    """How far a simulated sample lands from a real one (see the module doc)."""

    tv: float
    none_gap: float | None
    repair_gap: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"tv": self.tv, "none_gap": self.none_gap, "repair_gap": self.repair_gap}


def distance(real: ErrorSample, sim: ErrorSample) -> Distance:
    """`Distance` of `sim` from `real` (gaps are sim − real, in points)."""
    none_gap = (
        sim.none_score - real.none_score
        if sim.none_score is not None and real.none_score is not None
        else None
    )
    rs, ss = real.repairable_share, sim.repairable_share
    repair_gap = 100.0 * (ss - rs) if rs is not None and ss is not None else None
    return Distance(tv_distance(real.distribution(), sim.distribution()), none_gap, repair_gap)


def one_edit_repairable(
    domain: Any, task: Task, action: str, check: Callable[[Task, str], bool], max_edits: int | None = None
) -> bool:
    """Whether one edit of `domain`'s grammar (`Domain.edit_operators`, which never reads the
    reference) turns `action` into one that `check` passes; at most `max_edits` are checked."""
    edits = domain.edit_operators(task, action)
    for edit in edits[:max_edits] if max_edits is not None else edits:
        if edit.text != action and check(task, edit.text):
            return True
    return False


def attach_repairs(
    sample: ErrorSample,
    answers: Sequence[tuple[Task, str]],
    domain: Any,
    check: Callable[[Task, str], bool],
    *,
    limit: int | None = None,
    max_edits: int | None = None,
) -> None:
    """Set `Failure.repairable` (`one_edit_repairable`) on `sample`'s failures, whose answers
    are `answers` (aligned); on at most `limit` of them, evenly spread over the list, when given
    (each check runs the world model once per edit). The count checked is in the notes."""
    n = len(sample.failures)
    if len(answers) != n:
        raise ValueError(f"{len(answers)} answers for {n} failures")
    picks = range(n) if limit is None or limit >= n else sorted({int(i * n / limit) for i in range(limit)})
    for i in picks:
        task, action = answers[i]
        fixable = one_edit_repairable(domain, task, action, check, max_edits)
        sample.failures[i] = dataclasses.replace(sample.failures[i], repairable=fixable)
    sample.notes["repair_checked"] = f"{len(picks)} of {n} failures" + (
        f" (first {max_edits} edits each)" if max_edits is not None else ""
    )


def evaluator_check(evaluator: Any) -> Callable[[Task, str], bool]:
    """``check(task, action)`` — solved by `evaluator` from the task's initial state."""

    def check(task: Task, action: str) -> bool:
        return bool(evaluator.check(AgentState(task=task), Action(action)).solved)

    return check


def simulated_drafts(
    tasks: Sequence[Task], profile: Any, seeds: Iterable[int] = (0,)
) -> Iterable[tuple[int, Task, str]]:
    """(seed, task, first draft) of the simulated LLM under `profile` (a name, a `Profile` or
    None for the default), for every task and seed."""
    from cm_gym.llm.simulated import SimulatedLLM

    for seed in seeds:
        llm = SimulatedLLM(seed=seed, profile=profile)
        for task in tasks:
            yield seed, task, llm.draft_action(task)
