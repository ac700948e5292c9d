"""Systematic bug injection into HumanEval's canonical solutions.

For each problem, every single edit of `families.all_mutations` inside the solution's body is a
candidate; candidates are grouped by HumanEvalFix class (`families.FAMILIES`, in that priority)
and tried in a seeded order per (problem, family). A candidate is kept when the program still
parses and fails at least one of the problem's tests without timing out; at most
`MAX_BUGS_PER_PROBLEM` families per problem, one bug each. Because the families are edits of
*features* (a ``<``/``<=`` next to boundary wording, a ``range`` bound, a ``sorted`` order, an
accumulator's start value), the same slip recurs across problems that share the feature.

Vetting runs the trusted-derived program (canonical or mutant) in a killable worker
(`_vet.py`): on the converted cases, or on upstream's ``check`` for pytest-mode problems (program
and test together, as upstream's harness runs them — our own derived code, never an agent's);
results are cached by the loader. Its deadlines are CPU time (the same on a busy machine); the
worker's wall clock is only a hang guard: a problem whose vetting it stops (twice) is left out of
this load, listed in ``LoadReport.unverified`` and not cached.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from typing import Any

from cm_gym.domains.base import LoadReport
from cm_gym.domains.code.edits import Mutation
from cm_gym.domains.humaneval.families import FAMILIES, all_mutations, kind_family
from cm_gym.evaluators.testrun import TestSuite
from cm_gym.evaluators.worker import Worker

logger = logging.getLogger(__name__)
MAX_BUGS_PER_PROBLEM = 3
TRIES_PER_FAMILY = 4
VET_CASE_S = 0.25  # CPU seconds per converted case
VET_CHECK_S = 5.0  # CPU seconds for upstream's check
HANG_FACTOR = 20.0  # the worker's wall-clock hang guard, times its CPU budget


class _Unverified(Exception):
    """The hang guard stopped a vetting run: the machine, not the program."""


@dataclass(frozen=True)
class InjectedBug:
    family: str
    program: str
    description: str


def _order(task_id: str, family: str, m: Mutation) -> str:
    return hashlib.blake2b(
        f"{task_id}|{family}|{m.kind}|{m.start}|{m.new}".encode(), digest_size=8
    ).hexdigest()


class Injector:
    """Vets candidate bugs; `cache` maps a problem id to its vetted result (JSON-serialisable)."""

    def __init__(self, cache: dict[str, Any]) -> None:
        self.cache = cache
        self.changed = False
        self._worker: Worker | None = None

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()

    # -- running a trusted-derived program ------------------------------------------------------
    def _passes(
        self, program: str, suite: TestSuite, test_source: str = "", function: str = ""
    ) -> list[bool] | None:
        """Per-test pass flags, or None when the run timed out or blew its memory cap."""
        if self._worker is None:
            self._worker = Worker("cm_gym.domains.humaneval._vet", memory_mb=512)
        for _attempt in range(2):
            if suite.mode == "cases":
                cases = [[c.name, c.expr, c.input, c.expected] for c in suite.cases]
                cpu = VET_CASE_S * (len(cases) + 4)
                res = self._worker.call("run_cases", program, suite.function, cases, VET_CASE_S,
                                        timeout=HANG_FACTOR * cpu, cpu_budget_s=cpu)  # fmt: skip
            else:
                cpu = VET_CHECK_S + 2
                res = self._worker.call("run_check", program, test_source, function, VET_CHECK_S,
                                        timeout=HANG_FACTOR * cpu, cpu_budget_s=cpu)  # fmt: skip
            if res.status != "timeout":
                return [bool(x) for x in res.value] if res.ok else None
        raise _Unverified(res.error)

    # -- one problem ----------------------------------------------------------------------------
    def bugs_for(
        self, row: dict[str, Any], suite: TestSuite, report: LoadReport
    ) -> tuple[TestSuite, list[InjectedBug]]:
        """The problem's suite (cases the canonical fails removed) and its vetted bugs."""
        task_id = row["task_id"]
        program = row["prompt"] + row["canonical_solution"]
        entry = self.cache.get(task_id)
        if entry is None:
            try:
                entry = self._vet(row, program, suite)
            except _Unverified as exc:
                report.unverified.append((task_id, f"bug vetting stopped by its hang guard: {exc}"))
                return suite, []
            self.cache[task_id] = entry
            self.changed = True
        if entry.get("refused"):
            report.dropped.append((task_id, entry["refused"]))
            return suite, []
        dropped = set(entry.get("dropped", []))
        if dropped:
            report.dropped.extend(
                (f"{task_id}:{name}", "the canonical solution fails it") for name in sorted(dropped)
            )
            suite = replace(suite, cases=tuple(c for c in suite.cases if c.name not in dropped))
        bugs = []
        for family, kind, start, end, new, line in entry["bugs"]:
            m = Mutation(kind, start, end, program[start:end], new, line)
            bugs.append(InjectedBug(family, m.apply(program), m.description))
        if not bugs:
            report.dropped.append((task_id, "no tried single-edit bug of any family fails its tests"))
        return suite, bugs

    def _vet(self, row: dict[str, Any], program: str, suite: TestSuite) -> dict[str, Any]:
        task_id, body_start = row["task_id"], len(row["prompt"])
        run = (row["test"], row["entry_point"])
        base = self._passes(program, suite, *run)
        if base is None or not any(base):
            return {"refused": "the canonical solution does not pass its converted tests", "bugs": []}
        dropped = []
        if suite.mode == "cases":
            dropped = [c.name for c, ok in zip(suite.cases, base, strict=True) if not ok]
            suite = replace(suite, cases=tuple(c for c, ok in zip(suite.cases, base, strict=True) if ok))
        by_family: dict[str, list[Mutation]] = {}
        for m in all_mutations(program):
            if m.start >= body_start:
                by_family.setdefault(kind_family(m), []).append(m)
        bugs: list[list[Any]] = []
        for family in FAMILIES:
            if len(bugs) >= MAX_BUGS_PER_PROBLEM:
                break
            cands = sorted(by_family.get(family, []), key=lambda m, f=family: _order(task_id, f, m))
            for m in cands[:TRIES_PER_FAMILY]:
                flags = self._passes(m.apply(program), suite, *run)
                if flags is not None and not all(flags):
                    bugs.append([family, m.kind, m.start, m.end, m.new, m.line])
                    break
        return {"dropped": dropped, "bugs": bugs}
