"""The formal-verification world model: check the annotations, run Dafny in the sandbox, score.

U = verified members / all members (1 = the program verifies); solved iff Dafny reports no
errors and every member verified. An action that is not the task's program plus annotations is
a scored ``Outcome(status="error")`` (nothing is run); a program Dafny cannot parse or resolve is
``status="error"``. The budget is Boogie's resource limit (`rlimit` z3 units per implementation,
``details["budget_kind"]`` = "boogie-rlimit"): an implementation that spends it is not verified,
the same verdict on any machine. Wall time is only a hang guard (Boogie's per-implementation
`time_limit` and the sandbox's wall clock, both far above what the rlimit takes): a run it stops
is retried once, then its status is "infrastructure" (not the program's failure, never cached). A
process killed at its CPU-time backstop is ``status="budget"``.

Issue 33: a budget that bounds every check, from the task's reference (`task_budget`, measured once
per reference: its own verdict, cached like any other). z3's ``nlsat`` does not charge the rlimit
(a nonlinear quantified assertion ground for 12 minutes at any rlimit), so a task whose reference
verifies without it (`verifier.NO_NLSAT`, tried first) is checked without it, and an
implementation then spends its rlimit inside z3's search (z3 answers "canceled", Boogie prints
"timed out"): ``status="budget"``, ``details["stopped_by"] = "rlimit"``. Every check's CPU-time
backstop per verifier process is ``max(CPU_FLOOR_S, CPU_FACTOR × the reference's CPU seconds)``
rounded up to `CPU_STEP_S`, at most `MAX_CPU_S` (`reference_cpu_budget`; the reference itself and a
task without one, or whose reference does not verify, get `MAX_CPU_S` and z3's defaults).
``details`` record it: ``cpu_budget_s``, ``cpu_budget_kind`` ("reference" or "fixed"),
``reference_cpu_s``, ``z3_options`` and the run's ``cpu_s``.

Dafny's verdicts are cached persistently by program hash (`verdict_key` of the checker version,
the verifier's identity, the rlimit and CPU backstop, and the program;
``cache_dir("dafny")/dafny-verdicts.sqlite`` by default): a build or an RL run re-checks the same
drafts many times, and one check costs seconds of mono start-up and z3. Only verdicts Dafny itself
gave and CPU-backstop stops (the program's own failure, in CPU time) are stored (never a
hang-guard stop, a sandbox refusal, or a run without a verdict).
`check_many` verifies independent programs in parallel (`workers` sandboxed runs at once).
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.core.types import TRUNCATION, Action, AgentState, Outcome, truncate
from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.verifier import (
    DEFAULT_LIMITS,
    HANG_TIME_LIMIT,
    NO_NLSAT,
    RLIMIT,
    DafnyVerifier,
)
from cm_gym.evaluators.budgets import (
    BOOGIE_RLIMIT,
    budget_details,
    infrastructure,
    is_infrastructure,
    retry_once,
)
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxError
from cm_gym.evaluators.verdicts import VerdictCache, outcome_from_json, outcome_to_json, verdict_key

# 2: budgets in rlimit units, wall time only a hang guard (issue 25); 3: z3 without nlsat and a
# CPU backstop from the task's reference (issue 33)
CHECKER_VERSION = "3"
#: the CPU-time backstop per verifier process, from the task's reference (issue 33): at least
#: CPU_FLOOR_S (mono's start-up and Boogie take about 1 s, most references 1-3 s in all), else
#: CPU_FACTOR times the reference's CPU seconds rounded up to CPU_STEP_S (a coarse grid, so the
#: jitter of a CPU-time measurement on a busy machine seldom moves it), at most MAX_CPU_S
CPU_FACTOR = 10.0
CPU_FLOOR_S = 30.0
CPU_STEP_S = 30.0
MAX_CPU_S = DEFAULT_LIMITS.cpu_s
#: a run whose CPU came this near its backstop may have been stopped there (``details["stopped_by"]``:
#: the run's CPU is read from Boogie's process and the z3 it reaped, a little under z3's own)
_NEAR = 0.9


@dataclass(frozen=True)
class CheckBudget:
    """How one check is run: the CPU-time backstop per verifier process, where it comes from
    ("reference" or "fixed"), the reference's measured CPU seconds, and z3's options."""

    cpu_s: float
    kind: str = "fixed"
    reference_cpu_s: float | None = None
    z3_options: tuple[str, ...] = ()


SCHEMA = "cm_gym.dafny_verdicts.v1"
_DEFAULT_CACHE = object()


def default_cache_path() -> Path:
    """Where Dafny's verdicts persist by default."""
    return cache_dir("dafny") / "dafny-verdicts.sqlite"


def reference_cpu_budget(reference_cpu_s: float) -> float:
    """The CPU backstop of a check on a task whose reference verified in `reference_cpu_s`."""
    want = max(CPU_FLOOR_S, CPU_FACTOR * max(0.0, float(reference_cpu_s)))
    return min(MAX_CPU_S, math.ceil(want / CPU_STEP_S) * CPU_STEP_S)


def _tool_identity(path: str) -> str:
    """The verifier's identity for cache keys: its resolved path, size and modification time
    (running ``dafny /version`` would cost a mono start-up per evaluator)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


class DafnyEvaluator:
    """`check(state, action)` for Dafny tasks. Creating it raises `ToolNotFoundError` (one clear
    message with the install command) when the verifier is not installed.

    Arguments: `rlimit` (Boogie's resource limit per implementation: the budget), `time_limit`
    (Boogie's per-implementation wall-clock limit, s: a hang guard), `limits` / `sandbox` (the
    run's; its wall clock is a hang guard too), `cpu_s` (a fixed CPU-time backstop per verifier
    process and z3's defaults for every check; default None: per task, `task_budget`), `cache` (a
    path, None for memory only; default `default_cache_path()`), `workers` (parallel runs in
    `check_many`)."""

    def __init__(
        self,
        verifier: DafnyVerifier | None = None,
        *,
        time_limit: int = HANG_TIME_LIMIT,
        limits: Limits | None = None,
        sandbox: Sandbox | None = None,
        cache: Any = _DEFAULT_CACHE,
        workers: int = 2,
        rlimit: int = RLIMIT,
        cpu_s: float | None = None,
    ) -> None:
        self.fixed_cpu = cpu_s is not None or limits is not None or verifier is not None
        if cpu_s is not None:
            if not float(cpu_s) > 0:
                raise ValueError(f"cpu_s must be positive, got {cpu_s!r}")
            limits = dataclasses.replace(limits or DEFAULT_LIMITS, cpu_s=float(cpu_s))
        self.verifier = verifier or DafnyVerifier(
            sandbox, time_limit=time_limit, limits=limits, rlimit=rlimit
        )
        path = default_cache_path() if cache is _DEFAULT_CACHE else cache
        self.cache = VerdictCache(path, schema=SCHEMA, what="dafny verdict cache")
        self.workers = max(1, int(workers))
        self.calls = 0
        self.runs = 0
        self._budgets: dict[str, CheckBudget] = {}
        self._reference_lock = threading.Lock()

    def check(self, state: AgentState, action: Action) -> Outcome:
        """Verify the annotated program `action` (see module doc)."""
        self.calls += 1
        program, ref = str(state.task.meta.get("program", "")), state.task.reference
        # the budget is known only after the action's annotations were accepted: a refused action
        # never runs the verifier, not even to measure the reference
        return self._check(
            program, action.text, lambda: self._budget_for(action.text, ref, self.task_budget(program, ref))
        )

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        """`check` for independent programs on the same state, run in parallel (`workers`)."""
        self.calls += len(actions)
        program, ref = str(state.task.meta.get("program", "")), state.task.reference

        def one(a: Action) -> Outcome:
            return self._check(
                program, a.text, lambda: self._budget_for(a.text, ref, self.task_budget(program, ref))
            )

        if self.workers == 1 or len(actions) < 2:
            return [one(a) for a in actions]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(actions))) as pool:
            return list(pool.map(one, actions))

    def _fixed(self, z3_options: tuple[str, ...] | None = None) -> CheckBudget:
        v = self.verifier
        opts = tuple(getattr(v, "z3_options", ())) if z3_options is None else z3_options
        return CheckBudget(v.limits.cpu_s, "fixed", None, opts)

    @staticmethod
    def _budget_for(text: str, reference: str | None, budget: CheckBudget) -> CheckBudget:
        """The reference itself is checked as it was measured (at `MAX_CPU_S`: one run, cached)."""
        if budget.kind == "reference" and reference and text.strip() == reference.strip():
            return CheckBudget(MAX_CPU_S, "fixed", None, budget.z3_options)
        return budget

    def task_budget(self, program: str, reference: str | None) -> CheckBudget:
        """The budget of every check on this task. "fixed" (the verifier's CPU backstop and z3
        options) when `cpu_s`, `limits` or a verifier was given, or the task has no reference, or
        its reference does not verify at `MAX_CPU_S`; else "reference": z3 without ``nlsat`` when
        the reference verifies so (`NO_NLSAT`: the rlimit then bounds z3), with it otherwise, and
        the CPU backstop `reference_cpu_budget` of the reference's CPU seconds in that mode. The
        reference is verified once per mode tried (its verdict cached like any other)."""
        if self.fixed_cpu or not reference or not reference.strip():
            return self._fixed()
        text = reference.strip() + "\n"
        with self._reference_lock:  # one measurement per reference, also under check_many
            if text in self._budgets:
                return self._budgets[text]
            budget = self._fixed(())
            for opts in (NO_NLSAT, ()):
                ref = self._check(program, text, CheckBudget(MAX_CPU_S, "fixed", None, opts))
                if is_infrastructure(ref):
                    # the hang guard stopped the measurement: nothing is known about the reference
                    # (a busy machine must not choose z3's options); this check gets the fixed
                    # budget and the next one measures again
                    return self._fixed()
                used = ref.details.get("cpu_s")
                if ref.solved and isinstance(used, (int, float)) and used > 0:
                    budget = CheckBudget(reference_cpu_budget(used), "reference", float(used), opts)
                    break
            self._budgets[text] = budget
            return budget

    def close(self) -> None:
        """Close the verdict cache's file."""
        self.cache.close()

    def _key(self, text: str, budget: CheckBudget | None = None) -> str:
        v = self.verifier
        b = budget or self._fixed()
        return verdict_key({"checker": CHECKER_VERSION, "dafny": _tool_identity(v.dafny), "program": text,
                            "rlimit": v.rlimit, "z3": list(b.z3_options), "cpu_s": b.cpu_s})  # fmt: skip

    def _check(
        self, program: str, text: str, budget: CheckBudget | Callable[[], CheckBudget] | None = None
    ) -> Outcome:
        try:
            annotations = extract_annotations(program, text)
        except AnnotationError as exc:
            return Outcome(
                0.0, False, feedback=f"invalid annotations: {exc}", status="error", reason=str(exc)
            )
        budget = (budget() if callable(budget) else budget) or self._fixed()
        text = text.strip() + "\n"  # outer blank space means nothing to Dafny: one verdict per program
        key = self._key(text, budget)
        cached = self.cache.get(key)
        if cached is not None:
            return outcome_from_json(cached, cached_hit=True)
        budget_info = {"cpu_budget_s": budget.cpu_s, "cpu_budget_kind": budget.kind,
                       "reference_cpu_s": budget.reference_cpu_s, "z3_options": list(budget.z3_options)}  # fmt: skip
        outcome = retry_once(lambda: self._run(text, len(annotations), budget), "dafny run")
        outcome = dataclasses.replace(outcome, details={**dict(outcome.details), **budget_info})
        # a CPU-time stop ("budget") is the program's own failure in a unit that does not depend on
        # load (the key holds the CPU limit): cached, so a draft that grinds z3 is paid for once
        if outcome.status in ("ok", "budget") or outcome.details.get("parse_failed"):
            self.cache.put(key, outcome_to_json(outcome))
        return outcome

    def _run(self, text: str, n_annotations: int, budget: CheckBudget | None = None) -> Outcome:
        budget = budget or self._fixed()
        cpu = budget.cpu_s
        try:
            self.runs += 1
            report, run = self.verifier.verify(text, cpu_s=cpu, z3_options=budget.z3_options)
        except SandboxError as exc:
            return Outcome(0.0, False, feedback=str(exc), status="refused", reason=str(exc))
        details: dict[str, Any] = {
            "members": dict(report.members),
            "timed_out": list(report.timed_out_members),
            "out_of_resource": list(report.out_of_resource_members),
            "verifier_errors": list(report.errors),
            "annotations": n_annotations,
            "wall_s": round(run.wall_s, 3),
            "cpu_s": round(run.cpu_s, 3),
            "isolation": run.isolation,
            **budget_details(BOOGIE_RLIMIT, self.verifier.rlimit),
        }
        errors = "; ".join(report.errors[:3])
        if run.timed_out:
            reason = (
                f"dafny ran past the sandbox's wall-clock hang guard of {self.verifier.limits.wall_s:.0f} s"
            )
            return infrastructure(reason, **details)
        if report.timed_out_members and run.wall_s < self.verifier.time_limit:
            # Boogie's timer is wall clock per implementation: it cannot have fired in a shorter run.
            # Boogie says "timed out" when z3 answers "canceled": z3 spent the implementation's
            # rlimit inside its search (issue 33), or z3 died at its CPU backstop (RLIMIT_CPU) or
            # memory cap. Either is the program's own failure, in units that do not depend on load
            names = ", ".join(report.timed_out_members[:5])
            if run.cpu_s < _NEAR * cpu:  # z3 did not come near its backstop: the rlimit stopped it
                details["stopped_by"] = "rlimit"
                reason = f"out of resource: z3 spent its rlimit of {self.verifier.rlimit:,} units on {names}"
            else:  # z3's CPU is in the run's (Boogie reaps it): either may have come first
                details["stopped_by"] = "rlimit-or-cpu"
                reason = (f"the prover was stopped (its rlimit of {self.verifier.rlimit:,} units, its "
                          f"{cpu:.0f} s CPU backstop or its {self.verifier.limits.memory_mb} MB memory "
                          f"cap) on {names}")  # fmt: skip
            return Outcome(0.0, False, feedback=reason, status="budget", reason=reason, details=details)
        if report.timed_out_members:
            reason = (
                f"Boogie's wall-clock hang guard of {self.verifier.time_limit} s per implementation stopped "
                + ", ".join(report.timed_out_members[:5])
            )
            return infrastructure(reason, **details)
        if report.inconclusive_members:
            # Boogie's prover died under it ("inconclusive"): z3 killed at its CPU backstop
            # (RLIMIT_CPU; its CPU is in the run's, Boogie reaps it) or its memory cap, the
            # program's own failure like the rlimit
            names = ", ".join(report.inconclusive_members[:5])
            details["stopped_by"] = "cpu" if run.cpu_s >= _NEAR * cpu else "prover-died"
            reason = (f"the prover was stopped (its {cpu:.0f} s CPU backstop or its "
                      f"{self.verifier.limits.memory_mb} MB memory cap) on {names}")  # fmt: skip
            return Outcome(0.0, False, feedback=reason, status="budget", reason=reason, details=details)
        if run.signal and run.describe_exit().endswith("(CPU limit)"):
            details["stopped_by"] = "cpu"
            reason = f"a verifier process used more than its {cpu:.0f} s of CPU time"
            return Outcome(0.0, False, feedback=reason, status="budget", reason=reason, details=details)
        if report.parse_failed:
            details["parse_failed"] = True
            msg = f"dafny could not parse/resolve the program: {errors}"
            return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), status="error",
                           reason=msg, details=details)  # fmt: skip
        if report.summary is None:
            tail = " | ".join((run.stdout + run.stderr).strip().splitlines()[-3:])
            msg = f"dafny gave no verdict ({run.describe_exit()}): {tail}"
            return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), status="error",
                           reason=msg, details=details)  # fmt: skip
        n = len(report.members)
        if report.solved:
            return Outcome(1.0, True, feedback=f"verified ({n} members)", status="ok", details=details)
        failed = [m for m, ok in report.members.items() if not ok]
        spent = report.out_of_resource_members
        timed = f"; out of resource (rlimit {self.verifier.rlimit}): {', '.join(spent)}" if spent else ""
        feedback = (
            f"{report.verified}/{n} members verified; not verified: {', '.join(failed[:5])}{timed}. {errors}"
        )
        return Outcome(report.score, False, feedback=truncate(feedback, TRUNCATION["feedback"]), status="ok",
                       details=details)  # fmt: skip
