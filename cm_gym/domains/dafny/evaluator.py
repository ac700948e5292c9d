"""The formal-verification world model: check the annotations, run Dafny in the sandbox, score.

U = verified members / all members (1 = the program verifies); solved iff Dafny reports no
errors and every member verified. An action that is not the task's program plus annotations is
a scored ``Outcome(status="error")`` (nothing is run); a program Dafny cannot parse or resolve is
``status="error"``; a run past the wall-clock limit is ``status="timeout"``.

Dafny's verdicts are cached persistently by program hash (`verdict_key` of the checker version,
the verifier's identity, the time limits and the program; ``cache_dir("dafny")/dafny-verdicts.sqlite``
by default): a build or an RL run re-checks the same drafts many times, and one check costs
seconds of mono start-up and z3. Only verdicts Dafny itself gave are stored (never a timeout, a
sandbox refusal, or a run without a verdict). `check_many` verifies independent programs in
parallel (`workers` sandboxed runs at once).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.verifier import DafnyVerifier
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxError
from cm_gym.evaluators.verdicts import VerdictCache, outcome_from_json, outcome_to_json, verdict_key
from cm_gym.paths import cache_dir
from cm_gym.types import TRUNCATION, Action, AgentState, Outcome, truncate

CHECKER_VERSION = "1"
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

    Arguments: `time_limit` (Dafny's per-implementation limit, s), `limits` / `sandbox` (the run's),
    `cache` (a path, None for memory only; default `default_cache_path()`), `workers` (parallel
    runs in `check_many`)."""

    def __init__(
        self,
        verifier: DafnyVerifier | None = None,
        *,
        time_limit: int = 30,
        limits: Limits | None = None,
        sandbox: Sandbox | None = None,
        cache: Any = _DEFAULT_CACHE,
        workers: int = 2,
    ) -> None:
        self.verifier = verifier or DafnyVerifier(sandbox, time_limit=time_limit, limits=limits)
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
                            "time_limit": v.time_limit, "wall_s": v.limits.wall_s, "cpu_s": v.limits.cpu_s})  # fmt: skip

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
        outcome = self._run(text, len(annotations))
        if outcome.status == "ok" or outcome.details.get("parse_failed"):
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
            "verifier_errors": list(report.errors),
            "annotations": n_annotations,
            "wall_s": round(run.wall_s, 3),
            "isolation": run.isolation,
        }
        errors = "; ".join(report.errors[:3])
        if run.timed_out:
            reason = f"dafny ran past the {self.verifier.limits.wall_s:.0f}s limit"
            return Outcome(0.0, False, feedback=reason, status="timeout", reason=reason, details=details)
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
        timed = f"; timed out: {', '.join(report.timed_out_members)}" if report.timed_out_members else ""
        feedback = (
            f"{report.verified}/{n} members verified; not verified: {', '.join(failed[:5])}{timed}. {errors}"
        )
        return Outcome(report.score, False, feedback=truncate(feedback, TRUNCATION["feedback"]), status="ok",
                       details=details)  # fmt: skip
