"""`check_dataset`: load a benchmark's data and run every task's reference through its world model.

What a user adding a dataset runs first (``cm-gym data check --benchmark NAME [--data DIR]``): the
loader's refusals (each file named, with the reason), drops and label disagreements
(`LoadReport`), then each reference's outcome under the budget it gets in evaluation (the world
model's default), classified as *solved*, *over budget* (status "budget" / "timeout": the
reference does not decide within its deterministic budget: steps, conflicts, rlimit, CPU time),
*hang guard* (status "infrastructure": the wall-clock hang guard stopped the check twice — the
machine, not the reference; never a verdict), *unevaluable* (status "unevaluable" or "undecided":
the task cannot be judged, e.g. a Spider gold beyond the row cap, a model whose quantified
assertions cannot be decided) or *failed* (any other outcome: the world model judges the
reference wrong or cannot run it). A *status disagreement* is a verdict that contradicts the
task's own status or folder label (``details["verdict"]`` against ``meta["status"]`` /
``meta["label"]``; the SAT and SMT loaders set them) or a disagreement the loader reported. The
budget line names the budget's unit and limit and the most any reference used
(``details["budget_kind"]``, ``["budget_limit"]``, ``["budget_used"]``). A folder from which no
task loads still gets its table: every refused file and dropped task is listed.
The dataset passes when no file is refused, no reference fails and none was stopped by the hang
guard or left unverified at load (``strict``: and none is over budget or unevaluable).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cm_gym.core.types import Action, AgentState, CmGymError, Outcome, Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.registry import DataRootError, get_benchmark, get_domain

#: budget units that count the same on every machine (CPU seconds count the same under any load
#: on one machine, but not to the millisecond: `DataCheck.verdicts` leaves them out)
EXACT_UNITS = frozenset({"sqlite-vm-steps", "sat-conflicts", "z3-rlimit", "boogie-rlimit"})
COLUMNS = (
    "loaded", "dropped", "solved", "over budget", "hang guard", "unevaluable", "failed", "disagree", "s/check",
)  # fmt: skip
VERDICTS = ("sat", "unsat")


@dataclass(frozen=True)
class Checked:
    """One reference's outcome, classified."""

    task_id: str
    family: str
    kind: str  # solved | over budget | hang guard | unevaluable | failed
    status: str
    reason: str
    seconds: float
    disagreement: str = ""
    budget_kind: str = ""
    budget_limit: float | None = None
    budget_used: float | None = None


@dataclass
class DataCheck:
    """Everything `check_dataset` found (see the module docstring)."""

    benchmark: str
    data: str
    load: LoadReport = field(default_factory=LoadReport)
    load_error: str = ""
    checked: list[Checked] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for c in self.checked if c.kind == kind)

    @property
    def disagreements(self) -> list[tuple[str, str]]:
        return list(self.load.disagreements) + [
            (c.task_id, c.disagreement) for c in self.checked if c.disagreement
        ]

    def passed(self, strict: bool = False) -> bool:
        """No refused file, no failed reference, nothing stopped by the hang guard or unverified
        at load (strict: nothing over budget or unevaluable either)."""
        bad = self.count("failed") + self.count("hang guard") + len(self.load.unverified)
        bad += self.count("over budget") + self.count("unevaluable") if strict else 0
        return not self.load_error and not self.load.refused and bad == 0

    def verdicts(self) -> list[tuple[str, str, str, float | None]]:
        """(task id, kind, status, budget used in an exact unit) of every checked reference: what
        must not change with machine load (the load-independence test and benchmark)."""
        return [
            (c.task_id, c.kind, c.status, c.budget_used if c.budget_kind in EXACT_UNITS else None)
            for c in self.checked
        ]

    def loaded(self) -> dict[str, list[tuple[str, str]]]:
        """The loader's refusals, drops and unverified instances (`LoadReport`), by part."""
        return {
            "refused": list(self.load.refused),
            "dropped": list(self.load.dropped),
            "unverified": list(self.load.unverified),
        }

    def budget(self) -> str:
        """One line: the budget unit and limit of the references' verdicts and the most used."""
        kinds = sorted({c.budget_kind for c in self.checked if c.budget_kind})
        if not kinds:
            return ""
        parts = []
        for kind in kinds:
            mine = [c for c in self.checked if c.budget_kind == kind]
            limits = sorted({c.budget_limit for c in mine if c.budget_limit is not None})
            used = [c.budget_used for c in mine if c.budget_used is not None and c.kind == "solved"]
            limit = "/".join(_number(v) for v in limits) or "?"
            most = f"; solved references used at most {_number(max(used))}" if used else ""
            parts.append(f"{kind} (limit {limit}{most})")
        return "budget: " + ", ".join(parts)

    def rows(self) -> list[tuple[str, list[str]]]:
        """(family, cells) per family and a total row, in `COLUMNS` order."""
        fams: dict[str, list[Checked]] = collections.defaultdict(list)
        for c in self.checked:
            fams[c.family].append(c)
        dropped = collections.Counter(self.load.family_of.get(name, "?") for name, _ in self.load.dropped)
        out = []
        for fam in sorted(set(fams) | set(dropped)):
            out.append((fam, self._cells(fams.get(fam, []), dropped.get(fam, 0))))
        out.append(("total", self._cells(self.checked, len(self.load.dropped))))
        return out

    @staticmethod
    def _cells(items: list[Checked], dropped: int) -> list[str]:
        kinds = collections.Counter(c.kind for c in items)
        secs = sum(c.seconds for c in items) / len(items) if items else 0.0
        return [
            str(len(items)),
            str(dropped),
            str(kinds["solved"]),
            str(kinds["over budget"]),
            str(kinds["hang guard"]),
            str(kinds["unevaluable"]),
            str(kinds["failed"]),
            str(sum(1 for c in items if c.disagreement)),
            f"{secs:.3f}",
        ]

    def table(self, shown: int = 20) -> str:
        """The one table (plus the listed refusals, failures, drops and disagreements)."""
        width = max([len("family")] + [len(f) for f, _ in self.rows()])
        head = f"{'family':<{width}}  " + "  ".join(f"{c:>11}" for c in COLUMNS)
        lines = [f"{self.benchmark} data check: {self.data}"]
        if self.budget():
            lines.append(self.budget())
        lines += [head, "-" * len(head)]
        lines += [f"{fam:<{width}}  " + "  ".join(f"{v:>11}" for v in cells) for fam, cells in self.rows()]
        if self.load_error:
            lines.append(f"\nthe folder was refused: {self.load_error}")
        sections = [
            ("refused files", self.load.refused),
            (
                "failed references",
                [(c.task_id, f"{c.status}: {c.reason}") for c in self.checked if c.kind == "failed"],
            ),
            ("over budget", [(c.task_id, c.reason) for c in self.checked if c.kind == "over budget"]),
            (
                "stopped by the hang guard (the machine, not the reference: run again)",
                [(c.task_id, c.reason) for c in self.checked if c.kind == "hang guard"],
            ),
            ("unverified at load (stopped by the hang guard: run again)", self.load.unverified),
            ("unevaluable", [(c.task_id, c.reason) for c in self.checked if c.kind == "unevaluable"]),
            ("dropped by the loader", self.load.dropped),
            ("status disagreements", self.disagreements),
            ("notes", self.load.notes),
        ]
        for title, items in sections:
            if items:
                lines.append(f"\n{title} ({len(items)}):")
                lines += [f"  {name}: {why}" for name, why in items[:shown]]
                if len(items) > shown:
                    lines.append(f"  ... and {len(items) - shown} more")
        return "\n".join(lines)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def classify(task: Task, outcome: Outcome) -> tuple[str, str]:
    """(kind, status disagreement or "") of one reference outcome (see the module docstring)."""
    if outcome.solved:
        kind = "solved"
    elif outcome.status == "infrastructure":
        kind = "hang guard"
    elif outcome.status in ("budget", "timeout"):
        kind = "over budget"
    elif outcome.status in ("unevaluable", "undecided"):
        kind = "unevaluable"
    else:
        kind = "failed"
    verdict = str(outcome.details.get("verdict", ""))
    status, label = str(task.meta.get("status", "")), str(task.meta.get("label", ""))
    why = ""
    if verdict in VERDICTS and status in VERDICTS and verdict != status:
        why = f"the reference answers {verdict}, the header says {status}"
    elif verdict in VERDICTS and label in VERDICTS and verdict != label and outcome.solved:
        why = f"the reference proves {verdict}, the folder label says {label}"
    return kind, why


def check_dataset(
    benchmark: str,
    data: str | Path | None = None,
    *,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    evaluator_kwargs: dict[str, object] | None = None,
) -> DataCheck:
    """Load `benchmark` (from `data`), check every reference (the first `limit` tasks when
    given); `progress(done, total)` is called after each check."""
    spec = get_benchmark(benchmark)
    result = DataCheck(spec.name, str(data) if data is not None else "(the benchmark's own data)")
    try:
        tasks = spec.load(data, report=result.load)
    except DataRootError as exc:
        if not (result.load.refused or result.load.dropped or result.load.unverified):
            raise  # a usage error (no such folder, a generated benchmark): one line, not a table
        result.load_error = str(exc)  # nothing loaded: the table still names every file
        return result
    except CmGymError as exc:
        result.load_error = str(exc)
        return result
    if limit is not None:
        tasks = tasks[: max(0, limit)]
    evaluator = get_domain(spec.domain_name).make_evaluator(**(evaluator_kwargs or {}))
    for i, task in enumerate(tasks):
        t0 = time.perf_counter()
        outcome = evaluator.check(AgentState(task), Action(task.reference))
        seconds = time.perf_counter() - t0
        kind, why = classify(task, outcome)
        reason = outcome.reason or outcome.feedback
        details = outcome.details or {}
        used = details.get("budget_used")
        result.checked.append(
            Checked(
                task.task_id,
                task.family or task.env_id,
                kind,
                outcome.status,
                reason,
                seconds,
                why,
                str(details.get("budget_kind", "")),
                details.get("budget_limit"),
                float(used) if isinstance(used, (int, float)) else None,
            )  # fmt: skip
        )
        if progress is not None:
            progress(i + 1, len(tasks))
    return result
