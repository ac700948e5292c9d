"""Which SAT checks are bounded before they run, so that they may skip the killable worker (issue 35).

The SAT world model checks in a reused worker process (`cm_gym.domains.isolated`) because a
conflict budget bounds a solver's *search*, not the CPU time or memory of propagating over a huge
clause set: the worker adds a CPU-time backstop (`CPU_LIMIT_S`, 30 s) and a memory cap. The round
trip costs ~0.25 ms of CPU per check on the 2-core reference machine (both processes wake up with
cold caches; a no-op call costs 0.08 ms) — more than the whole solve of a small SATLIB instance
(uf20-91: 0.17 ms), so the world model cost 1.5-1.9x the raw python-sat call on SATLIB's families.

A *solver* task's check is bounded a priori when its clause file is small and its conflict budget
(from the action, at most the task's allowance) small, like SQL's bounded queries
(`cm_gym.domains.sql.vetting`): between two conflicts a CDCL solver propagates over every clause at
most once per literal of it that becomes false, so one run of `budget` conflicts visits at most

    (budget + 1) * (L * w + budget * n * n)

literals, with L the file's literals, w its widest clause, n its variables and ``budget * n`` the
literals of at most `budget` learned clauses of at most n literals each (the budget plus
`BUDGET_SLACK`: solvers check it after a conflict). Checks under `MAX_WORK`
visits (about 5 s of CPU at a pessimistic 5 ns per visit, six times under the worker's backstop, so
the backstop could not have fired: the verdict is the worker's) with a file under `MAX_FILE_BYTES`
run in this process; their memory is a few MB at most (``budget * n <= sqrt(MAX_WORK)`` literals).
Measured: every SATLIB family's reference configuration (12-150 conflicts) is under the bound
(flat100-239, 300 variables and 50 conflicts, the largest: 3.1e8 visits by the bound, about 1 ms
of CPU); on random 3-SAT at the threshold with 20 to 3,000 variables, every solver run here at the
largest budget the bound admits took at most 9 ms of CPU.

Never in process: *encoding* tasks (their default budget of 100,000 conflicts gives no useful
bound), configurations with preprocessing on (python-sat's `Processor` has no budget) or with a
solver whose budget does not bound its conflicts (`OVERSHOOTING_SOLVERS`: Glucose), files over
the size cap or unreadable ones (the worker reports why). A configuration that fails to parse, or
asks for more than the task's allowance, is answered before any solving and costs nothing to
check here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cm_gym.core.types import Task
from cm_gym.domains.sat.dimacs import cached_cnf, file_state
from cm_gym.domains.sat.errors import SolverConfigError, SolverRefused
from cm_gym.domains.sat.solver import parse_config

#: the literal visits a check may need at most to run in process (see the module doc)
MAX_WORK = 1_000_000_000
#: conflicts a solver may run past its budget (it checks the budget after a conflict, some after a
#: few; measured at most +3 on threshold 3-SAT, tests/domains/sat/test_sat_bounds.py)
BUDGET_SLACK = 8
#: python-sat solvers whose conflict budget does not bound their conflicts: Glucose checks it only
#: between restarts, and ran 31,303 conflicts under a budget of 50 on a 200-variable threshold
#: formula (537 under 50 at 300 variables). Their checks are never bounded here: always the worker.
OVERSHOOTING_SOLVERS = frozenset({"glucose3", "glucose4", "glucose42", "gluecard4"})
#: DIMACS files larger than this are always checked in the worker (the parse happens here too)
MAX_FILE_BYTES = 64 * 1024


def solver_work(n_vars: int, literals: int, width: int, budget: int) -> int:
    """The bound on literal visits of one run of `budget` conflicts (module doc)."""
    budget += BUDGET_SLACK
    return (budget + 1) * (literals * max(1, width) + budget * n_vars * n_vars)


def _shape(path: str) -> tuple[int, int, int] | None:
    """(variables, literals, widest clause) of a DIMACS file as it is now (read through
    `cached_cnf`, like the check itself), or None when it is over the size cap or cannot be read."""
    state = file_state(path)
    return _shape_at(path, state) if state is not None and state[0] <= MAX_FILE_BYTES else None


@lru_cache(maxsize=256)
def _shape_at(path: str, state: tuple[int, int]) -> tuple[int, int, int]:
    cnf = cached_cnf(path)
    return cnf.n_vars, int(cnf.flat.size) - cnf.n_clauses, cnf.max_width


def bounded_solver_check(task: Task, text: str) -> bool:
    """Whether checking `text` for the solver task `task` is bounded a priori (module doc): True
    also when the check ends before any solving (a configuration that does not parse, or over the
    allowance); False whenever anything about it is unknown."""
    features: Any = task.features
    if features.get("kind") != "solver":
        return False
    try:
        config = parse_config(text)
    except (SolverConfigError, SolverRefused):
        return True  # the check is this very parse: it fails in microseconds wherever it runs
    try:
        allowance = int(features.get("max_budget", 0)) or None
        if allowance is not None and config.budget > allowance:
            return True  # refused before solving
        if config.preprocess or config.solver in OVERSHOOTING_SOLVERS:
            return False
        path = task.meta.get("path")
        shape = _shape(path) if isinstance(path, str) else None
    except Exception:  # noqa: BLE001 - anything odd (a bad feature, an unreadable file): the worker
        return False
    return shape is not None and solver_work(*shape, config.budget) <= MAX_WORK
