"""Run python-sat solvers under deterministic conflict budgets, and the solver-configuration action.

A solver-configuration action is a few ``key: value`` lines::

    solver: maplecm
    phase: default        # default | true | false  (preferred polarity of every variable)
    preprocess: off       # off | on  (CaDiCaL-based preprocessing, model restored afterwards)
    budget: 150           # conflicts; must not exceed the task's allowance

Budgets count conflicts (`Solver.conf_budget` + `solve_limited`), never wall-clock time, so a run
replays exactly. Solvers without a conflict budget in python-sat (lingeling, kissat) are refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from cm_gym.domains.sat.errors import SolverConfigError, SolverRefused

#: solvers whose python-sat binding supports a deterministic conflict budget, strongest first
BUDGET_SOLVERS = (
    "maplecm",
    "minisat22",
    "glucose4",
    "glucose42",
    "glucose3",
    "mergesat3",
    "cadical195",
    "cadical153",
    "maplesat",
    "minicard",
    "gluecard4",
    "maplechrono",
)
#: known python-sat solvers without a conflict budget (refused with a reason)
NO_BUDGET_SOLVERS = ("lingeling", "kissat404", "cadical300", "cadical103", "cryptosat", "minisatgh")
PHASES = ("default", "true", "false")
CONFIG_KEYS = ("solver", "phase", "preprocess", "budget")
MAX_BUDGET = 10_000_000


@dataclass(frozen=True)
class SolverConfig:
    """A parsed solver-configuration action."""

    solver: str = "cadical153"
    phase: str = "default"
    preprocess: bool = False
    budget: int = 10_000

    def render(self) -> str:
        """The configuration as action text (parses back to the same config)."""
        return (
            f"solver: {self.solver}\nphase: {self.phase}\npreprocess: {'on' if self.preprocess else 'off'}\n"
            f"budget: {self.budget}"
        )


@dataclass(frozen=True)
class SolveResult:
    """What one budgeted solver run returned: "sat" with a model, "unsat", or "unknown"."""

    verdict: str
    model: list[int] | None
    conflicts: int
    #: the solver decided, but only after more conflicts than its budget: "unknown" (see `solve`)
    past_budget: bool = False


@lru_cache(maxsize=4096)  # pure; actions repeat (drafts, revisions, every check of a folder)
def parse_config(text: str) -> SolverConfig:
    """Parse a configuration action; unknown keys, solvers or values raise `SolverConfigError`,
    a solver without deterministic budgets raises `SolverRefused`."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z_]+)\s*[:=]\s*(\S+)", line)
        if m is None:
            raise SolverConfigError(f"line {number}: expected 'key: value', got {line[:60]!r}")
        key, value = m.group(1).lower(), m.group(2).lower()
        if key not in CONFIG_KEYS:
            raise SolverConfigError(f"line {number}: unknown key {key!r}; keys: {', '.join(CONFIG_KEYS)}")
        if key in values:
            raise SolverConfigError(f"line {number}: {key!r} given twice")
        values[key] = value
    if "solver" not in values or "budget" not in values:
        raise SolverConfigError("a configuration needs at least 'solver:' and 'budget:'")
    solver = values["solver"]
    if solver in NO_BUDGET_SOLVERS:
        raise SolverRefused(f"solver {solver} has no deterministic conflict budget in python-sat")
    if solver not in BUDGET_SOLVERS:
        raise SolverConfigError(f"unknown solver {solver!r}; choose one of {', '.join(BUDGET_SOLVERS)}")
    phase = values.get("phase", "default")
    if phase not in PHASES:
        raise SolverConfigError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    pre = values.get("preprocess", "off")
    if pre not in ("on", "off", "true", "false", "yes", "no"):
        raise SolverConfigError(f"preprocess must be on or off, got {pre!r}")
    if not values["budget"].isdigit() or int(values["budget"]) <= 0:
        raise SolverConfigError(f"budget must be a positive number of conflicts, got {values['budget']!r}")
    budget = int(values["budget"])
    if budget > MAX_BUDGET:
        raise SolverRefused(f"budget {budget} exceeds the sandbox maximum of {MAX_BUDGET} conflicts")
    return SolverConfig(solver, phase, pre in ("on", "true", "yes"), budget)


def solve(clauses: Sequence[Sequence[int]], n_vars: int, config: SolverConfig) -> SolveResult:
    """Solve `clauses` with `config` under its conflict budget (deterministic). A decision reached
    after more conflicts than the budget is "unknown": python-sat's Glucose solvers check their
    budget only between restarts and decided after 31,303 conflicts under a budget of 50 (every
    other solver decides within its budget; `tests/domains/sat/test_sat_bounds.py`), which would
    let a configuration side-step a task's allowance."""
    work = clauses
    processor = None
    if config.preprocess:
        from pysat.process import Processor

        processor = Processor(bootstrap_with=clauses)
        processed = processor.process(rounds=1)
        if getattr(processed, "status", True) is False:
            return SolveResult("unsat", None, 0)
        work = processed.clauses
    from pysat.solvers import Solver  # on use: `cm_gym/domains/smt/__init__.py` says why

    with Solver(name=config.solver, bootstrap_with=work) as s:
        if config.phase != "default":
            sign = 1 if config.phase == "true" else -1
            s.set_phases([sign * v for v in range(1, n_vars + 1)])
        s.conf_budget(config.budget)
        answer = s.solve_limited()
        conflicts = int(s.accum_stats().get("conflicts", 0))
        model = s.get_model() if answer else None
    if answer is None or conflicts > config.budget:
        return SolveResult("unknown", None, conflicts, past_budget=answer is not None)
    if answer and processor is not None and model is not None:
        model = list(processor.restore(model))
    return SolveResult("sat" if answer else "unsat", model, conflicts)


def falsified_clauses(clauses: Sequence[Sequence[int]], model: Sequence[int]) -> int:
    """How many clauses `model` leaves false (0 = a verified model)."""
    true = set(model)
    return sum(1 for clause in clauses if not any(lit in true for lit in clause))


@dataclass(frozen=True, eq=False)
class ClauseIndex:
    """A CNF laid out for vectorised model checks: variables, signs and clause start offsets."""

    n_vars: int
    variables: np.ndarray
    positive: np.ndarray
    starts: np.ndarray

    @classmethod
    def build(cls, n_vars: int, clauses: Sequence[Sequence[int]]) -> ClauseIndex | None:
        """None when a clause is empty (no model can exist, and reduceat needs non-empty runs)."""
        if any(len(c) == 0 for c in clauses):
            return None
        flat = np.fromiter((lit for c in clauses for lit in c), dtype=np.int64)
        starts = np.cumsum([0] + [len(c) for c in clauses[:-1]], dtype=np.int64)
        return cls(n_vars, np.abs(flat), flat > 0, starts)

    def falsified(self, model: Sequence[int]) -> int:
        """How many clauses `model` leaves false (every clause checked, vectorised)."""
        if len(self.starts) == 0:
            return 0
        lits = np.asarray(model, dtype=np.int64)
        assign = np.zeros(max(self.n_vars, int(np.abs(lits).max(initial=0))) + 1, dtype=bool)
        assign[lits[lits > 0]] = True
        truth = assign[self.variables] == self.positive
        return int(len(self.starts) - np.count_nonzero(np.logical_or.reduceat(truth, self.starts)))
