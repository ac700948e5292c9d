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
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.core.types import TRUNCATION, Action, AgentState, Outcome, truncate
from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.verifier import DEFAULT_LIMITS, HANG_TIME_LIMIT, RLIMIT, DafnyVerifier
from cm_gym.evaluators.budgets import BOOGIE_RLIMIT, budget_details, infrastructure, retry_once
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxError
from cm_gym.evaluators.verdicts import VerdictCache, outcome_from_json, outcome_to_json, verdict_key

CHECKER_VERSION = "2"  # 2: budgets in rlimit units, wall time only a hang guard (issue 25)
SCHEMA = "cm_gym.dafny_verdicts.v1"
_DEFAULT_CACHE = object()


def default_cache_path() -> Path:
    """Where Dafny's verdicts persist by default."""
    return cache_dir("dafny") / "dafny-verdicts.sqlite"


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
    run's; its wall clock is a hang guard too), `cpu_s` (the CPU-time backstop per verifier
    process, default `DEFAULT_LIMITS.cpu_s`: z3 does not count every loop against the rlimit, so
    some failing drafts stop only here), `cache` (a path, None for memory only; default
    `default_cache_path()`), `workers` (parallel runs in `check_many`)."""

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

    def check(self, state: AgentState, action: Action) -> Outcome:
        """Verify the annotated program `action` (see module doc)."""
        self.calls += 1
        return self._check(str(state.task.meta.get("program", "")), action.text)

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        """`check` for independent programs on the same state, run in parallel (`workers`)."""
        self.calls += len(actions)
        program = str(state.task.meta.get("program", ""))
        if self.workers == 1 or len(actions) < 2:
            return [self._check(program, a.text) for a in actions]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(actions))) as pool:
            return list(pool.map(lambda a: self._check(program, a.text), actions))

    def close(self) -> None:
        """Close the verdict cache's file."""
        self.cache.close()

    def _key(self, text: str) -> str:
        v = self.verifier
        return verdict_key({"checker": CHECKER_VERSION, "dafny": _tool_identity(v.dafny), "program": text,
                            "rlimit": v.rlimit, "cpu_s": v.limits.cpu_s})  # fmt: skip

    def _check(self, program: str, text: str) -> Outcome:
        try:
            annotations = extract_annotations(program, text)
        except AnnotationError as exc:
            return Outcome(
                0.0, False, feedback=f"invalid annotations: {exc}", status="error", reason=str(exc)
            )
        text = text.strip() + "\n"  # outer blank space means nothing to Dafny: one verdict per program
        key = self._key(text)
        cached = self.cache.get(key)
        if cached is not None:
            return outcome_from_json(cached, cached_hit=True)
        outcome = retry_once(lambda: self._run(text, len(annotations)), "dafny run")
        # a CPU-time stop ("budget") is the program's own failure in a unit that does not depend on
        # load (the key holds the CPU limit): cached, so a draft that grinds z3 is paid for once
        if outcome.status in ("ok", "budget") or outcome.details.get("parse_failed"):
            self.cache.put(key, outcome_to_json(outcome))
        return outcome

    def _run(self, text: str, n_annotations: int) -> Outcome:
        try:
            self.runs += 1
            report, run = self.verifier.verify(text)
        except SandboxError as exc:
            return Outcome(0.0, False, feedback=str(exc), status="refused", reason=str(exc))
        details: dict[str, Any] = {
            "members": dict(report.members),
            "timed_out": list(report.timed_out_members),
            "out_of_resource": list(report.out_of_resource_members),
            "verifier_errors": list(report.errors),
            "annotations": n_annotations,
            "wall_s": round(run.wall_s, 3),
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
            # Boogie says "timed out" also when its z3 dies, and z3 dies at the CPU backstop
            # (RLIMIT_CPU) when it grinds where its rlimit does not count: the program's own failure
            reason = (
                f"the prover was stopped (its {self.verifier.limits.cpu_s:.0f} s CPU backstop or its "
                f"{self.verifier.limits.memory_mb} MB memory cap) on "
                + ", ".join(report.timed_out_members[:5])
            )
            return Outcome(0.0, False, feedback=reason, status="budget", reason=reason, details=details)
        if report.timed_out_members:
            reason = (
                f"Boogie's wall-clock hang guard of {self.verifier.time_limit} s per implementation stopped "
                + ", ".join(report.timed_out_members[:5])
            )
            return infrastructure(reason, **details)
        if run.signal and run.describe_exit().endswith("(CPU limit)"):
            reason = f"a verifier process used more than its {self.verifier.limits.cpu_s:.0f} s of CPU time"
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
