"""The SAT world model: checks encodings of generated problems and solver configurations on DIMACS.

*Encoding* tasks: compile the constraint lines to CNF, solve under a deterministic conflict budget,
decode the model and score it with the family's independent checker (U = fraction of the problem's
constraints satisfied; for an unsatisfiable problem only the UNSAT verdict scores 1).
*Solver* tasks: parse the configuration, refuse budgets over the task's allowance, run the chosen
python-sat solver under the budget, verify a model clause by clause; U = 1 for a verified model or
an UNSAT answer within the budget.

`check` never raises: bad input becomes an `Outcome` with status "error" / "refused" / "budget".
Parsing, solving and model checks run in a reused killable worker (`cm_gym.domains.isolated`):
conflicts bound a solver's search (the verdict's budget, ``details["budget_kind"]`` =
"sat-conflicts"), not the time one propagation round over a huge clause set takes, so a CPU-time
backstop (`cpu_limit_s`, status "budget") and a memory cap (`memory_mb`, status "budget") bound
the rest, and a wall-clock hang guard far above them (`time_limit_s`) stops a check the machine
starved (status "infrastructure", retried once; `cm_gym.evaluators.budgets`). A solver task's
check whose work is bounded before it runs (small file, small conflict budget: `bounds.py`) runs
in this process instead, with the same verdict and without the round trip (``isolation="auto"``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from cm_gym.core.types import CmGymError, Outcome, Task
from cm_gym.domains.isolated import IsolatedChecks, IsolatedEvaluator
from cm_gym.domains.sat.bounds import bounded_solver_check
from cm_gym.domains.sat.dimacs import cached_cnf, file_state
from cm_gym.domains.sat.encoding import CompiledEncoding, compile_encoding
from cm_gym.domains.sat.errors import EncodingTooLarge, SolverConfigError, SolverRefused
from cm_gym.domains.sat.problems import Family, family
from cm_gym.domains.sat.solver import (
    BUDGET_SOLVERS,
    ClauseIndex,
    SolverConfig,
    SolveResult,
    falsified_clauses,
    parse_config,
    solve,
)
from cm_gym.evaluators.budgets import SAT_CONFLICTS, budget_details

logger = logging.getLogger(__name__)

MAX_ACTION_CHARS = 20_000
SHOWN_VIOLATIONS = 4
#: the bounds of one check besides its conflict budget: CPU time (the backstop; the reference of
#: every shipped or generated task uses well under 1 s of it, `bench/bench_budgets.py`), memory,
#: and the wall-clock hang guard, ten times the CPU backstop
CPU_LIMIT_S = 30.0
TIME_LIMIT_S = 300.0
MEMORY_MB = 1024
#: "auto": checks bounded before they run (`bounds.py`) in this process, the rest in the worker;
#: "worker": every check in the worker (``isolated=False``: every check in this process)
ISOLATION_MODES = ("auto", "worker")


def _instance(path: str) -> tuple[int, list[list[int]], ClauseIndex | None]:
    """A DIMACS file's variable count, clauses and vectorised clause index (cached per process and
    file state: a file rewritten in place is read again)."""
    return _instance_at(path, file_state(path))


@lru_cache(maxsize=256)
def _instance_at(path: str, state: tuple[int, int] | None) -> tuple[int, list[list[int]], ClauseIndex | None]:
    cnf = cached_cnf(path)
    clauses = cnf.clauses()
    return cnf.n_vars, clauses, ClauseIndex.build(cnf.n_vars, clauses)


@lru_cache(maxsize=1024)
def compiled_encoding(fam: str, params_json: str, text: str) -> CompiledEncoding:
    """Compile `text` for one problem, cached: compilation is deterministic and the result is
    never mutated, and agents re-submit the same encoding often (drafts, revisions, builds)."""
    return compile_encoding(text, family(fam).signature(json.loads(params_json)))


def past_budget(solver: str, budget: int, result: SolveResult, usual: str) -> str:
    """The reason of a solve that gave no answer within its conflict budget: `usual`, or why a
    decision reached past the budget does not count (`solver.solve`)."""
    conflicts = result.conflicts
    if result.past_budget:
        return (
            f"{solver} decided only after {conflicts} conflicts, past its budget of {budget} "
            "(it checks the budget between restarts only): no answer within the budget"
        )
    return usual


def _fail(status: str, reason: str, **details: Any) -> Outcome:
    return Outcome(score=0.0, solved=False, feedback=reason, status=status, reason=reason, details=details)


class SatEvaluator(IsolatedEvaluator):
    """Deterministic SAT world model for both task kinds (see the module docstring).

    `conflict_budget` bounds the solve of an *encoding*; `encoding_solver` is the solver used for
    it. Solver-kind tasks use the budget in the action, capped by the task's allowance.
    `cpu_limit_s` and `memory_mb` bound each check's CPU time and memory, `time_limit_s` is its
    wall-clock hang guard; `isolated=False` runs checks in this process without those bounds
    (what the worker itself does). `isolation` "auto" (default) runs a solver task's check in this
    process when its work is bounded before it runs (`cm_gym.domains.sat.bounds`: small file,
    small conflict budget; the verdict is the worker's), "worker" sends every check to the worker.
    """

    def __init__(
        self,
        conflict_budget: int = 100_000,
        encoding_solver: str = "cadical153",
        time_limit_s: float = TIME_LIMIT_S,
        memory_mb: int = MEMORY_MB,
        isolated: bool = True,
        cpu_limit_s: float = CPU_LIMIT_S,
        isolation: str = "auto",
    ) -> None:
        if isolation not in ISOLATION_MODES:
            raise SolverConfigError(
                f"isolation must be one of {', '.join(ISOLATION_MODES)}, got {isolation!r}"
            )
        if encoding_solver not in BUDGET_SOLVERS or int(conflict_budget) <= 0:
            raise SolverConfigError(
                f"encoding_solver must be one of {', '.join(BUDGET_SOLVERS)} and conflict_budget positive"
            )
        if not float(time_limit_s) > 0 or not float(cpu_limit_s) > 0 or int(memory_mb) <= 0:
            raise SolverConfigError("time_limit_s, cpu_limit_s and memory_mb must be positive")
        self.encoding_config = SolverConfig(encoding_solver, "default", False, int(conflict_budget))
        self.calls = 0
        self.isolated, self.isolation = bool(isolated), isolation
        config = {"conflict_budget": int(conflict_budget), "encoding_solver": encoding_solver}
        self._checks = IsolatedChecks(
            "cm_gym.domains.sat.engine",
            config,
            time_limit_s=time_limit_s,
            memory_mb=memory_mb,
            cpu_limit_s=cpu_limit_s,
        )

    def refusal(self, text: str) -> Outcome | None:
        """An over-long action is refused here, before a worker round trip."""
        if len(text) > MAX_ACTION_CHARS:
            return _fail("refused", f"the action has {len(text)} characters; the limit is {MAX_ACTION_CHARS}")
        return None

    def bounded(self, task: Task, text: str) -> bool:
        """With ``isolation="auto"``: a solver task's check whose work is bounded before it runs
        (`bounds.bounded_solver_check`) runs in this process, with the worker's verdict."""
        return self.isolation == "auto" and bounded_solver_check(task, text)

    def check_here(self, task: Task, text: str) -> Outcome:
        """The check itself, in this process (no wall-clock or memory bound of its own)."""
        if len(text) > MAX_ACTION_CHARS:
            return _fail("refused", f"the action has {len(text)} characters; the limit is {MAX_ACTION_CHARS}")
        kind = task.features.get("kind")
        try:
            if kind == "encoding":
                return self._check_encoding(task, text)
            if kind == "solver":
                return self._check_solver(task, text)
            return _fail("error", f"task {task.task_id} has unknown kind {kind!r}")
        except SolverRefused as exc:
            return _fail("refused", str(exc))
        except EncodingTooLarge as exc:
            return _fail("refused", str(exc))
        except CmGymError as exc:
            return _fail("error", str(exc))
        except Exception as exc:  # noqa: BLE001 - a world model must not crash the run
            logger.exception("SAT evaluator failed on task %s", task.task_id)
            return _fail("error", f"internal error: {type(exc).__name__}: {exc}")

    # -- encodings ------------------------------------------------------------------------------
    def _check_encoding(self, task: Task, text: str) -> Outcome:
        problem = task.meta.get("problem")
        if not isinstance(problem, Mapping) or "family" not in problem or "params" not in problem:
            return _fail("error", f"task {task.task_id} has no problem description (meta['problem'])")
        spec = family(problem["family"])
        params = problem["params"]
        expected = task.meta.get("expected", "sat" if spec.satisfiable(params) else "unsat")
        compiled = compiled_encoding(problem["family"], json.dumps(params, sort_keys=True), text)
        note = (
            f" ({compiled.out_of_range} atom(s) indexed outside their array were treated as false)"
            if compiled.out_of_range
            else ""
        )
        # Solve twice, preferring every problem variable false, then true: an encoding that only
        # works when the solver happens to pick a lucky model (a missing at-most-one or
        # at-least-one) is caught by one of the two. The worse outcome counts.
        outcomes = [
            self._solve_once(compiled, phase, spec, params, expected, note) for phase in ("false", "true")
        ]
        return min(outcomes, key=lambda o: (o.status == "ok", o.score))

    def _solve_once(
        self,
        compiled: CompiledEncoding,
        phase: str,
        spec: Family,
        params: Mapping[str, Any],
        expected: str,
        note: str,
    ) -> Outcome:
        cfg = replace(self.encoding_config, phase=phase)
        result = solve(compiled.clauses, compiled.table.n_vars, cfg)
        details: dict[str, Any] = {
            "verdict": result.verdict,
            "conflicts": result.conflicts,
            "clauses": len(compiled.clauses),
            "out_of_range_atoms": compiled.out_of_range,
            "phase": phase,
            **budget_details(SAT_CONFLICTS, cfg.budget, result.conflicts),
        }
        if result.verdict == "unknown":
            usual = f"the solver hit its budget of {cfg.budget} conflicts"
            return _fail("budget", past_budget(cfg.solver, cfg.budget, result, usual), **details)
        if result.verdict == "unsat":
            if expected == "unsat":
                return Outcome(
                    1.0, True, "UNSAT: correct, the problem has no solution." + note, details=details
                )
            return Outcome(
                0.0,
                False,
                "The encoding is UNSAT, but the problem has a solution: a constraint line is too strong."
                + note,
                details=details,
            )
        assert result.model is not None
        checks = spec.check(params, compiled.table.decode(result.model))
        bad = [desc for desc, ok in checks if not ok]
        score = (len(checks) - len(bad)) / len(checks) if checks else 0.0
        details.update(n_constraints=len(checks), violated=len(bad))
        if not bad and expected == "sat":
            return Outcome(
                1.0, True, "SAT: the decoded solution satisfies every constraint." + note, details=details
            )
        if not bad:
            logger.error("a solution satisfies a %s problem marked unsatisfiable", spec.name)
            score = 0.0
        shown = "; ".join(bad[:SHOWN_VIOLATIONS]) + (" ..." if len(bad) > SHOWN_VIOLATIONS else "")
        feedback = (
            f"SAT, but the decoded solution violates {len(bad)} of {len(checks)} constraints: {shown}.{note}"
        )
        return Outcome(min(score, 0.999), False, feedback, details=details)

    # -- solver configurations ------------------------------------------------------------------
    def _check_solver(self, task: Task, text: str) -> Outcome:
        config = parse_config(text)
        allowance = int(task.features.get("max_budget", 0)) or None
        if allowance is not None and config.budget > allowance:
            raise SolverRefused(
                f"budget {config.budget} exceeds the task's allowance of {allowance} conflicts"
            )
        if "path" not in task.meta:
            return _fail("error", f"task {task.task_id} names no DIMACS file (meta['path'])")
        n_vars, clauses, index = _instance(str(task.meta["path"]))
        result = solve(clauses, n_vars, config)
        details: dict[str, Any] = {
            "verdict": result.verdict,
            "conflicts": result.conflicts,
            "solver": config.solver,
            **budget_details(SAT_CONFLICTS, config.budget, result.conflicts),
        }
        if result.verdict == "unknown":
            usual = f"{config.solver} gave no answer within {config.budget} conflicts"
            return _fail("budget", past_budget(config.solver, config.budget, result, usual), **details)
        if result.verdict == "unsat":
            return Outcome(1.0, True, f"UNSAT within {result.conflicts} conflicts.", details=details)
        assert result.model is not None
        falsified = index.falsified(result.model) if index else falsified_clauses(clauses, result.model)
        if falsified:
            return _fail("error", f"the returned model falsifies {falsified} clause(s)", **details)
        return Outcome(1.0, True, f"SAT: verified model after {result.conflicts} conflicts.", details=details)
