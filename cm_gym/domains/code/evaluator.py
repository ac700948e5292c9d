"""The code-repair world model: apply the patch, run the task's tests, score.

U = fraction of the task's tests passed; solved iff all pass; feedback = the first failing test's
name and assertion (truncated to 800 characters). The program runs in the sandbox and is only
called from the judge (`cm_gym.evaluators.judge`), a trusted process that decides every verdict:
nothing the program does in its own process can forge one. A malformed patch (including one too
deeply nested to parse) is a scored ``Outcome(status="error")``. The budget is CPU time of the
sandboxed processes (``details["budget_kind"]`` = "cpu-seconds"): each test may spend the task's
``per_test_timeout`` seconds of it and the suite ``limits.cpu_s`` (a test over it fails as timed
out), the same verdict on a quiet and on a busy machine. Wall time is only a hang guard: a check
it stops (a test the machine starved, or the whole run) is retried once, then its status is
"infrastructure" (not the patch's failure). The state is never touched: every run happens in a
fresh throw-away copy.
"""

from __future__ import annotations

import logging
from typing import Any

from cm_gym.core.types import Action, AgentState, Outcome
from cm_gym.domains.code.patch import PatchError, apply_patch
from cm_gym.evaluators.budgets import CPU_SECONDS, budget_details, infrastructure, retry_once
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxError
from cm_gym.evaluators.testrun import TestSuite, new_judge, run_suite

logger = logging.getLogger(__name__)

#: the suite's budgets: `cpu_s` seconds of the program's CPU time over all its tests (the
#: references of every shipped task use far less, `bench/bench_budgets.py`), `wall_s` the wall-clock
#: hang guard (raised further per suite, `cm_gym.evaluators.testrun.suite_hang_guard_s`)
DEFAULT_LIMITS = Limits(wall_s=600.0, cpu_s=60.0, memory_mb=512, max_procs=32, max_file_mb=8)


class CodeEvaluator:
    """`check(state, action)` for code-repair tasks (see module doc).

    `per_test_timeout` overrides the task's own CPU budget per test (seconds); `limits` are the
    whole run's (`cpu_s`: the CPU budget of all of a task's tests together; `wall_s`: a hang
    guard)."""

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        *,
        limits: Limits | None = None,
        per_test_timeout: float | None = None,
        isolation: str = "auto",
    ) -> None:
        self.limits = limits or DEFAULT_LIMITS
        self.sandbox = sandbox or Sandbox(self.limits, isolation=isolation)
        self.per_test_timeout = per_test_timeout
        self.judge = new_judge()
        self.calls = 0

    def close(self) -> None:
        """Stop the judge process (a later check starts a new one)."""
        self.judge.close()

    def _suite(self, task_meta: Any) -> TestSuite:
        suite = TestSuite.from_dict(task_meta["suite"])
        if self.per_test_timeout is not None:
            suite = TestSuite.from_dict({**suite.to_dict(), "per_test_timeout": self.per_test_timeout})
        return suite

    def check(self, state: AgentState, action: Action) -> Outcome:
        """Score `action` (a full program or a unified diff) on a fork of `state`'s task. Never
        raises for what the action is or does."""
        self.calls += 1
        try:
            return retry_once(lambda: self._check(state, action), "code check")
        except (RecursionError, MemoryError) as exc:  # defence in depth: each step already bounds these
            logger.warning("code check stopped by %s", type(exc).__name__)
            why = f"the action could not be checked ({type(exc).__name__})"
            return Outcome(0.0, False, feedback=why, status="error", reason=why)

    def _check(self, state: AgentState, action: Action) -> Outcome:
        task = state.task
        suite = self._suite(task.meta)
        try:
            program = apply_patch(task.meta["buggy"], action.text, suite.function)
        except PatchError as exc:
            return Outcome(0.0, False, feedback=f"invalid patch: {exc}", status="error", reason=str(exc))
        try:
            run = run_suite(self.sandbox, suite, program, limits=self.limits, judge=self.judge)
        except SandboxError as exc:
            logger.error("sandbox unavailable: %s", exc)
            return Outcome(0.0, False, feedback=str(exc), status="refused", reason=str(exc))
        sb = run.sandbox
        details: dict[str, Any] = {
            "passed": run.passed,
            "total": run.total,
            "tests": {r.name: r.status for r in run.results},
            "isolation": sb.isolation if sb else "",
            "wall_s": round(sb.wall_s, 4) if sb else 0.0,
            "stray_processes_killed": sb.strays_killed if sb else 0,
            "sandbox_uid": sb.uid if sb else None,
            "peak_rss_mb": sb.peak_rss_mb if sb else 0.0,
            "test_cpu_s": {r.name: r.cpu_s for r in run.results},
            **budget_details(CPU_SECONDS, float(suite.per_test_timeout), run.max_test_cpu_s),
        }
        if run.infrastructure:
            why = run.error or next(r.message for r in run.results if r.status == "infrastructure")
            return infrastructure(why, **details)
        if run.error:
            status = "timeout" if sb is not None and sb.timed_out else "error"
            return Outcome(
                0.0, False, feedback=run.first_failure(), status=status, reason=run.error, details=details
            )
        score = run.fraction
        solved = run.total > 0 and run.passed == run.total
        feedback = run.first_failure() or f"all {run.total} tests passed"
        return Outcome(score, solved, feedback=feedback, status="ok", details=details)
