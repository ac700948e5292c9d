"""The formal-verification world model: check the annotations, run Dafny in the sandbox, score.

U = verified members / all members (1 = the program verifies); solved iff Dafny reports no
errors and every member verified. An action that is not the task's program plus annotations is
a scored ``Outcome(status="error")`` (nothing is run); a program Dafny cannot parse or resolve is
``status="error"``; a run past the wall-clock limit is ``status="timeout"``.
"""

from __future__ import annotations

from typing import Any

from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.verifier import DafnyVerifier
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxError
from cm_gym.types import TRUNCATION, Action, AgentState, Outcome, truncate


class DafnyEvaluator:
    """`check(state, action)` for Dafny tasks. Creating it raises `ToolNotFoundError` (one clear
    message with the install command) when the verifier is not installed."""

    def __init__(
        self,
        verifier: DafnyVerifier | None = None,
        *,
        time_limit: int = 30,
        limits: Limits | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.verifier = verifier or DafnyVerifier(sandbox, time_limit=time_limit, limits=limits)
        self.calls = 0

    def check(self, state: AgentState, action: Action) -> Outcome:
        """Verify the annotated program `action` (see module doc)."""
        self.calls += 1
        program = str(state.task.meta.get("program", ""))
        try:
            annotations = extract_annotations(program, action.text)
        except AnnotationError as exc:
            return Outcome(
                0.0, False, feedback=f"invalid annotations: {exc}", status="error", reason=str(exc)
            )
        try:
            report, run = self.verifier.verify(action.text)
        except SandboxError as exc:
            return Outcome(0.0, False, feedback=str(exc), status="refused", reason=str(exc))
        details: dict[str, Any] = {
            "members": dict(report.members),
            "timed_out": list(report.timed_out_members),
            "verifier_errors": list(report.errors),
            "annotations": len(annotations),
            "wall_s": round(run.wall_s, 3),
            "isolation": run.isolation,
        }
        errors = "; ".join(report.errors[:3])
        if run.timed_out:
            reason = f"dafny ran past the {self.verifier.limits.wall_s:.0f}s limit"
            return Outcome(0.0, False, feedback=reason, status="timeout", reason=reason, details=details)
        if report.parse_failed:
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
        timed = f"; timed out: {', '.join(report.timed_out_members)}" if report.timed_out_members else ""
        feedback = (
            f"{report.verified}/{n} members verified; not verified: {', '.join(failed[:5])}{timed}. {errors}"
        )
        return Outcome(report.score, False, feedback=truncate(feedback, TRUNCATION["feedback"]), status="ok",
                       details=details)  # fmt: skip
