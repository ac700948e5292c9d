"""The SMT world model: z3 under a deterministic resource limit, with independent model checks.

*Encoding* tasks: the sandbox vets the script, z3 checks its body in a fresh context under
`rlimit`, and a ``sat`` model's values for the problem's variables are scored in Python against
the problem (`problems.check_model`); for an unsatisfiable problem only ``unsat`` scores 1.
*Solver* tasks: the configuration picks logic / tactic / rlimit (capped by the task's allowance);
U = 1 when z3's answer matches the benchmark's ``:status`` (any answer when the status is
unknown) and, for ``sat``, every assertion is true in the model (`modelcheck`: quantified
assertions are decided under the model on their own budget). An assertion shown false scores 0;
one that cannot be decided gives status "undecided" — neither solved nor "false in the model".
`check` never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cm_gym.core.types import CmGymError, Outcome, Task
from cm_gym.domains.isolated import IsolatedChecks, IsolatedEvaluator
from cm_gym.domains.smt.errors import ScriptRefused, SmtConfigError, SmtConfigRefused
from cm_gym.domains.smt.modelcheck import MODEL_CHECK_RLIMIT, decide_model
from cm_gym.domains.smt.problems import Problem, check_model
from cm_gym.domains.smt.sandbox import vet_script
from cm_gym.domains.smt.smtlib import file_text
from cm_gym.domains.smt.solver import (
    SmtConfig,
    cap_memory,
    const_for,
    hit_limit,
    parse_config,
    python_value,
    run,
)
from cm_gym.evaluators.budgets import Z3_RLIMIT, budget_details

logger = logging.getLogger(__name__)

SHOWN_VIOLATIONS = 4
#: the bounds of one check besides its rlimit: CPU time (the backstop for what the rlimit does not
#: count; a reference at its allowance uses a few seconds, `bench/bench_budgets.py`), z3's memory
#: ceiling (the worker may use `MEMORY_HEADROOM_MB` more before it is killed, so z3's own "out of
#: memory" is seen first), and the wall-clock hang guard, ten times the CPU backstop
CPU_LIMIT_S = 60.0
TIME_LIMIT_S = 600.0
MEMORY_MB = 2048
MEMORY_HEADROOM_MB = 512


def _fail(status: str, reason: str, **details: Any) -> Outcome:
    return Outcome(score=0.0, solved=False, feedback=reason, status=status, reason=reason, details=details)


class SmtEvaluator(IsolatedEvaluator):
    """Deterministic SMT world model for both task kinds (see the module docstring).

    `rlimit` bounds the check of an *encoding* script; solver tasks use the action's rlimit;
    `model_rlimit` bounds the decision of quantified assertions under a ``sat`` model. The rlimit
    is z3's deterministic budget (``details["budget_kind"]`` = "z3-rlimit") but not a time or
    memory bound (one ``repeat`` inside ``bvmul`` never returns): each check runs in a reused
    killable worker with `cpu_limit_s` of CPU time and `memory_mb` of memory (z3's own ceiling,
    plus a hard cap on the worker), both status "budget", and `time_limit_s` of wall clock as a
    hang guard (status "infrastructure", retried once). `isolated=False` checks in this process
    without those bounds.
    """

    def __init__(
        self,
        rlimit: int = 5_000_000,
        memory_mb: int = MEMORY_MB,
        model_rlimit: int = MODEL_CHECK_RLIMIT,
        time_limit_s: float = TIME_LIMIT_S,
        isolated: bool = True,
        cpu_limit_s: float = CPU_LIMIT_S,
    ) -> None:
        if (
            int(rlimit) <= 0
            or int(memory_mb) <= 0
            or int(model_rlimit) <= 0
            or not float(time_limit_s) > 0
            or not float(cpu_limit_s) > 0
        ):
            raise SmtConfigError(
                "rlimit, memory_mb, model_rlimit, time_limit_s and cpu_limit_s must be positive"
            )
        self.rlimit = int(rlimit)
        self.model_rlimit = int(model_rlimit)
        self.calls = 0
        self.isolated = bool(isolated)
        if not self.isolated:
            cap_memory(int(memory_mb))
        config = {"rlimit": self.rlimit, "memory_mb": int(memory_mb), "model_rlimit": self.model_rlimit}
        self._checks = IsolatedChecks(
            "cm_gym.domains.smt.engine",
            config,
            time_limit_s=time_limit_s,
            memory_mb=int(memory_mb) + MEMORY_HEADROOM_MB,
            cpu_limit_s=cpu_limit_s,
        )

    def check_here(self, task: Task, text: str) -> Outcome:
        """The check itself, in this process (no wall-clock or hard memory bound of its own)."""
        import z3  # on use (`cm_gym/domains/smt/__init__.py`)

        kind = task.features.get("kind")
        try:
            if kind == "encoding":
                return self._check_encoding(task, text)
            if kind == "solver":
                return self._check_solver(task, text)
            return _fail("error", f"task {task.task_id} has unknown kind {kind!r}")
        except (ScriptRefused, SmtConfigRefused) as exc:
            return _fail("refused", str(exc))
        except CmGymError as exc:
            return _fail("error", str(exc))
        except z3.Z3Exception as exc:
            return _fail("error", f"z3 error: {exc}")
        except Exception as exc:  # noqa: BLE001 - a world model must not crash the run
            logger.exception("SMT evaluator failed on task %s", task.task_id)
            return _fail("error", f"internal error: {type(exc).__name__}: {exc}")

    # -- encodings ------------------------------------------------------------------------------
    def _check_encoding(self, task: Task, text: str) -> Outcome:
        if not isinstance(task.meta.get("problem"), Mapping):
            return _fail("error", f"task {task.task_id} has no problem description (meta['problem'])")
        problem = Problem.from_json(task.meta["problem"])
        vetted = vet_script(text)
        result = run(vetted.body, SmtConfig("auto", "default", self.rlimit))
        details: dict[str, Any] = {
            "verdict": result.verdict,
            "rlimit_used": result.rlimit_used,
            "logic": vetted.logic,
            **budget_details(Z3_RLIMIT, self.rlimit, result.rlimit_used),
        }
        if result.verdict == "unknown":
            status = "budget" if hit_limit(result) else "ok"
            return _fail(status, f"z3 returned unknown ({result.reason})", **details)
        if result.verdict == "unsat":
            if problem.expected == "unsat":
                return Outcome(1.0, True, "unsat: correct, the problem has no solution.", details=details)
            return Outcome(
                0.0,
                False,
                "unsat, but the problem has a solution: an assertion is too strong.",
                details=details,
            )
        model = result.solver.model()
        values: dict[str, Any] = {}
        for name, _sort in problem.variables:
            const = const_for(name, vetted.declared.get(name, ""), result.ctx)
            values[name] = None if const is None else python_value(model.eval(const, model_completion=True))
        checks = check_model(problem, values)
        bad = [desc for desc, ok in checks if not ok]
        score = (len(checks) - len(bad)) / len(checks) if checks else 0.0
        details.update(n_checks=len(checks), violated=len(bad))
        if not bad and problem.expected == "sat":
            return Outcome(
                1.0, True, "sat: the model satisfies every constraint of the problem.", details=details
            )
        if not bad:
            logger.error("task %s: a model satisfies a problem marked unsatisfiable", task.task_id)
            score = 0.0
        shown = "; ".join(bad[:SHOWN_VIOLATIONS]) + (" ..." if len(bad) > SHOWN_VIOLATIONS else "")
        return Outcome(
            min(score, 0.999),
            False,
            f"sat, but the model violates {len(bad)} of {len(checks)} checks: {shown}.",
            details=details,
        )

    # -- solver configurations ------------------------------------------------------------------
    def _check_solver(self, task: Task, text: str) -> Outcome:
        config = parse_config(text)
        allowance = int(task.features.get("max_rlimit", 0)) or None
        if allowance is not None and config.rlimit > allowance:
            raise SmtConfigRefused(f"rlimit {config.rlimit} exceeds the task's allowance of {allowance}")
        status = str(task.meta.get("status", "unknown"))
        if "path" not in task.meta or status not in ("sat", "unsat", "unknown"):
            return _fail(
                "error", f"task {task.task_id} names no SMT-LIB file with a sat/unsat/unknown status"
            )
        result = run(file_text(str(task.meta["path"])), config)
        details: dict[str, Any] = {
            "verdict": result.verdict,
            "rlimit_used": result.rlimit_used,
            **budget_details(Z3_RLIMIT, config.rlimit, result.rlimit_used),
        }
        if result.verdict == "unknown":
            if hit_limit(result):
                return _fail("budget", f"z3 hit the resource limit of {config.rlimit}", **details)
            return _fail(
                "ok",
                f"z3 returned unknown ({result.reason}): the tactic or logic is incomplete here",
                **details,
            )
        if status != "unknown" and result.verdict != status:
            return _fail(
                "ok", f"z3 answered {result.verdict}, which contradicts the benchmark's status", **details
            )
        if result.verdict == "unsat":
            note = (
                "matching the benchmark's status"
                if status == "unsat"
                else "the status is unknown: z3's proof"
            )
            return Outcome(1.0, True, f"unsat ({note}).", details=details)
        logic = str(task.features.get("logic", "auto"))
        checked = decide_model(
            result.solver.model(), result.assertions, result.ctx, logic=logic, rlimit=self.model_rlimit
        )
        details.update(
            model_true=checked.true,
            model_false=checked.false,
            model_undecided=checked.undecided,
            model_rlimit_used=checked.rlimit_used,
        )
        if checked.verdict == "false":
            return _fail(
                "ok", f"sat, but {checked.false} assertion(s) are false in the returned model", **details
            )
        if checked.verdict == "undecided":
            return _fail(
                "undecided",
                f"sat, but {checked.undecided} quantified assertion(s) could not be decided in the returned "
                f"model within {self.model_rlimit} rlimit units (neither verified nor shown false)",
                **details,
            )
        return Outcome(1.0, True, "sat with a model that satisfies every assertion.", details=details)
