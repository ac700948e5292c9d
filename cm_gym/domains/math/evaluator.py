"""The math world model: vet the proof script, run ``coqc`` on statement + script in the sandbox,
and score Coq's verdict.

Score (U in {0, 1}; a proof is either checked or not):

- **1** — ``coqc`` accepted ``Qed`` and every assumption ``Print Assumptions`` lists is, by Coq's
  own name resolution, one of the allowed fully qualified axioms (`trust.ALLOWED_AXIOMS`) or one
  the statement declares itself (`checker` and `assumptions` module docs). Solved.
- **0** — everything else: the proof closed but depends on anything else (an admitted lemma of
  the statement file, ``AdmitAxiom.proof_admitted``, unsafe fixpoints …); Coq rejected a sentence
  or ``Qed`` (goals left); the script was refused before running (status "refused": forbidden
  command, a library not on the fixed list; "error": not Coq sentences); the statement itself does
  not load or requires a library not on the list (status "error"); ``coqc`` used its CPU-time budget
  (status "budget").

No partial credit: the open-goal count cannot tell a step towards the theorem from a detour
(``assert True. exact I.`` closes a goal it opened; ``assert False`` moves the whole theorem into
one goal), and Coq certifies complete proofs only, so any credit for goals "closed" before a
failure is credit for something nobody checked. miniF2F's own metric is the pass rate. The goal
counts stay in the feedback and in `Outcome.details` ("open_goals"), as information.

Feedback is Coq's first error, located in the script (sentence number and text) with the goal
counts. Verdicts are cached (`verdicts`); `check_many` checks independent scripts in parallel.

Budget (issue 25): CPU time of the ``coqc`` process (``limits.cpu_s``, its ``RLIMIT_CPU``;
``details["budget_kind"]`` = "cpu-seconds"), the same verdict on a quiet and on a busy machine: a
script that spends it is stopped at the sentence it was running (status "budget", score 0,
never cached). Coq's per-sentence ``Timeout`` (`tactic_timeout`, `qed_timeout`) and
the sandbox's wall clock are only hang guards far above it: a run they stop ("Timeout!") is
retried once, then its status is "infrastructure" (not the script's failure, never cached).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.core.types import TRUNCATION, Action, AgentState, Outcome, Task, truncate
from cm_gym.domains.math.checker import FILENAME, CoqVerdict, StatementLibraryError, build_plan, read_verdict
from cm_gym.domains.math.coqtool import CoqInstall, LibraryError, coq_install, find_coqc
from cm_gym.domains.math.script import ProofScript, ScriptError, parse_script
from cm_gym.domains.math.statement import statement_of
from cm_gym.domains.math.verdicts import VerdictCache, verdict_key
from cm_gym.evaluators.budgets import CPU_SECONDS, budget_details, infrastructure, retry_once
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxError, SandboxResult
from cm_gym.evaluators.verdicts import outcome_from_json as _outcome_from
from cm_gym.evaluators.verdicts import outcome_to_json as _outcome_to

logger = logging.getLogger(__name__)

CHECKER_VERSION = (
    "3"  # 2: no partial credit (issue 27); 3: a CPU-time budget, wall clock only a hang guard (issue 25)
)
#: `cpu_s`: the CPU-time budget of one ``coqc`` run (the 62 shipped reference proofs use at most a few
#: seconds, `bench/bench_budgets.py`); `wall_s`: the run's wall-clock hang guard
DEFAULT_LIMITS = Limits(
    wall_s=1200.0, cpu_s=60.0, memory_mb=4096, max_procs=16, max_file_mb=64, output_chars=300_000
)
#: Coq's per-sentence ``Timeout`` (wall clock), kept only as a hang guard (seconds)
HANG_TACTIC_S = 600
HANG_QED_S = 600
_DEFAULT_CACHE = object()


class MathEvaluator:
    """`check(state, action)` for math tasks. Creating it raises `ToolNotFoundError` (one message
    with the install command) when ``coqc`` is not installed.

    Arguments: `tactic_timeout` (Coq ``Timeout`` per tactic sentence, s: a hang guard), `qed_timeout`
    (for the kernel check at ``Qed``: a hang guard), `limits` (the sandbox's per-run limits: `cpu_s`
    the budget, `wall_s` a hang guard, memory), `cache`
    (a path, None for memory only; default ``cache_dir("math")/coq-verdicts.sqlite``), `workers`
    (parallel runs in `check_many`), `coqc` (the executable; default ``$CM_GYM_COQC`` or PATH).
    """

    def __init__(
        self,
        *,
        tactic_timeout: int = HANG_TACTIC_S,
        qed_timeout: int = HANG_QED_S,
        limits: Limits | None = None,
        sandbox: Sandbox | None = None,
        cache: Any = _DEFAULT_CACHE,
        workers: int = 2,
        coqc: str | None = None,
    ) -> None:
        self.install: CoqInstall = coq_install(coqc or find_coqc())
        self.tactic_timeout, self.qed_timeout = int(tactic_timeout), int(qed_timeout)
        self.limits = limits or DEFAULT_LIMITS
        # a Coq outside the system dirs (CM_GYM_COQC) and its library must exist in the minimal tree
        where = (os.path.dirname(os.path.realpath(self.install.coqc)), str(self.install.where))
        self.sandbox = sandbox or Sandbox(self.limits, extra_paths=where)
        path = default_cache_path() if cache is _DEFAULT_CACHE else cache
        self.cache = VerdictCache(path)
        self.workers = max(1, int(workers))
        self.calls = 0
        self.runs = 0

    # -- public ---------------------------------------------------------------------------------
    def check(self, state: AgentState, action: Action) -> Outcome:
        """Check the proof script `action` against the state's theorem (see module doc)."""
        self.calls += 1
        return self._check(state.task, action.text)

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        """`check` for independent scripts on the same state, run in parallel (`workers`)."""
        self.calls += len(actions)
        if self.workers == 1 or len(actions) < 2:
            return [self._check(state.task, a.text) for a in actions]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(lambda a: self._check(state.task, a.text), actions))

    # -- internals ------------------------------------------------------------------------------
    def _check(self, task: Task, text: str) -> Outcome:
        statement = statement_of(task)
        if not statement.prefix or not statement.name:
            msg = f"task {task.task_id} carries no parsed statement (meta['prefix'] / meta['theorem'])"
            return Outcome(0.0, False, feedback=msg, status="error", reason=msg)
        try:
            script = parse_script(text)
        except ScriptError as exc:
            status = "error" if "not a sequence of Coq sentences" in str(exc) else "refused"
            return Outcome(0.0, False, feedback=f"script refused: {exc}", status=status, reason=str(exc))
        key = verdict_key(
            {
                "checker": CHECKER_VERSION,
                "coq": self.install.version,
                "prefix": statement.prefix,
                "declared": list(statement.declared),
                "script": script.text(),
                "cpu_s": self.limits.cpu_s,
            }
        )
        cached = self.cache.get(key)
        if cached is not None:
            return _outcome_from(cached, cached_hit=True)
        try:
            plan = build_plan(
                statement,
                script,
                self.install,
                tactic_timeout=self.tactic_timeout,
                qed_timeout=self.qed_timeout,
            )
        except StatementLibraryError as exc:
            msg = f"the task's statement does not load with the standard library: {exc}"
            return Outcome(0.0, False, feedback=msg, status="error", reason=msg)
        except LibraryError as exc:
            return Outcome(0.0, False, feedback=f"script refused: {exc}", status="refused", reason=str(exc))
        outcome = retry_once(lambda: self._run(plan, script, statement.declared), "coqc run")
        if outcome.status in ("ok", "refused") or outcome.details.get("where") == "statement":
            self.cache.put(key, _outcome_to(outcome))
        return outcome

    def _run(self, plan: Any, script: ProofScript, declared: tuple[str, ...]) -> Outcome:
        argv = [self.install.coqc, "-q", "-no-glob", "-o", "scratch/task.vo", FILENAME]
        try:
            run = self.sandbox.run(argv, {FILENAME: plan.text}, limits=self.limits)
        except SandboxError as exc:
            return Outcome(0.0, False, feedback=str(exc), status="refused", reason=str(exc))
        self.runs += 1
        verdict = read_verdict(plan, run.stdout, run.stderr, run.returncode, declared)
        return self._score(verdict, script, run)

    def _score(self, v: CoqVerdict, script: ProofScript, run: SandboxResult) -> Outcome:
        details: dict[str, Any] = {
            "where": v.where,
            "failed_sentence": v.failed,
            "open_goals": list(v.open_goals),
            "assumptions": list(v.assumptions),
            "disallowed": list(v.disallowed),
            "wall_s": round(run.wall_s, 3),
            "isolation": run.isolation,
            "coq": self.install.short_version,
            **budget_details(CPU_SECONDS, self.limits.cpu_s, run.cpu_s),
        }
        if run.timed_out:
            return infrastructure(
                f"coqc ran past the sandbox's wall-clock hang guard of {self.limits.wall_s:.0f} s", **details
            )
        if v.where == "sentence" and v.error.startswith("Timeout"):
            return infrastructure(
                f"Coq's per-sentence wall-clock hang guard stopped sentence {v.failed}", **details
            )
        if v.where == "none" and run.describe_exit().endswith("(CPU limit)"):
            msg = (
                f"coqc used its CPU-time budget of {self.limits.cpu_s:g} s at sentence {v.failed} "
                f"(after {v.accepted} accepted)"
            )
            return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), status="budget",
                           reason=msg, details=details)  # fmt: skip
        if v.where == "proof":
            if v.disallowed:
                msg = "coqc accepted Qed, but the proof depends on what a proof may not use: " + ", ".join(
                    v.disallowed[:5]
                )
                return Outcome(0.0, False, feedback=msg, status="ok", reason=msg, details=details)
            used = ", ".join(v.assumptions) if v.assumptions else "none (closed under the global context)"
            msg = f"proof checked by coqc {self.install.short_version} (Qed accepted); axioms used: {used}"
            return Outcome(1.0, True, feedback=truncate(msg, TRUNCATION["feedback"]), details=details)
        if v.where == "sentence":
            n = len(script.sentences)
            details["failed_line"] = script.line_of(v.failed - 1)[0] if v.failed <= n else 0
            goals = v.open_goals
            open_now = goals[-1] if goals else 1
            closed = sum(max(0, a - b) for a, b in zip(goals, goals[1:], strict=False))
            number, line = script.line_of(v.failed - 1)
            where = (
                f"at Qed, after the whole script ({open_now} goal(s) still open)"
                if v.failed > n
                else f"at line {number} `{line}` ({open_now} goal(s) open, {closed} closed before it)"
            )
            msg = f"Coq rejected the proof {where}: {v.error}"
            return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), details=details)
        if v.where == "header":
            msg = f"Coq could not run the script's header: {v.error}"
            return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), details=details)
        if v.where == "statement":
            msg = f"the task's statement does not load with the standard library: {v.error}"
            return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), status="error",
                           reason=msg, details=details)  # fmt: skip
        tail = " | ".join((run.stderr or run.stdout).strip().splitlines()[-3:])
        msg = f"coqc gave no verdict ({run.describe_exit()}): {tail}"
        return Outcome(0.0, False, feedback=truncate(msg, TRUNCATION["feedback"]), status="error", reason=msg,
                       details=details)  # fmt: skip


def default_cache_path() -> Path:
    """Where verdicts persist by default."""
    return cache_dir("math") / "coq-verdicts.sqlite"
