"""The SAT domain's simulated-LLM error model: systematic, feature-dependent slips.

Encoding slips: a missing at-most-one (``exactly_one`` written ``at_least_one``), a missing
at-least-one (``exactly_one`` written ``at_most_one``), the full-board rows on a partial-queens task,
the capacity of a pigeonhole ignored, an edge constraint on the wrong colour (``color[v][c+1]``),
and the off-by-one precedence comparison (``<=`` ↔ ``<``). Solver slips: a solver too weak for the
budget, a budget too low for an UNSAT proof, a budget over the allowance, a solver without budgets,
and a forced phase. Each applies to the reference text and returns None where it does not fit.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.sat.edits import config_values, is_config, set_config_value

Apply = Callable[[Task, str, np.random.Generator], str | None]


def _fam(task: Task) -> str:
    return task.family or str(task.features.get("family", ""))


def _enc(task: Task) -> bool:
    return task.features.get("kind") == "encoding"


def _sub_line(pattern: str, repl: str, only_with: str | None = None) -> Apply:
    """Replace `pattern` once in the first line that matches (and mentions `only_with`)."""
    rx = re.compile(pattern)

    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        lines = action.splitlines()
        for i, line in enumerate(lines):
            if only_with is not None and only_with not in line:
                continue
            new, n = rx.subn(repl, line, count=1)
            if n:
                lines[i] = new
                return "\n".join(lines)
        return None

    return apply


def _p_missing_amo(task: Task) -> float:
    if not _enc(task):
        return 0.0
    base = {"coloring": 0.3, "multicoloring": 0.35, "pigeonhole": 0.25, "queens": 0.2, "scheduling": 0.2}
    bump = 0.1 if int(task.features.get("n_colors", 0)) >= 4 else 0.0
    return base.get(_fam(task), 0.0) + bump


def _p_missing_alo(task: Task) -> float:
    if not _enc(task):
        return 0.0
    if _fam(task) == "pigeonhole":
        return 0.35 if task.features.get("more_items_than_room") else 0.12
    return {"coloring": 0.1, "queens": 0.2, "scheduling": 0.1}.get(_fam(task), 0.0)


def _p_wrong_colour(task: Task) -> float:
    if _fam(task) not in ("coloring", "multicoloring"):
        return 0.0
    return 0.15 + 0.05 * max(0, int(task.features.get("n_colors", 3)) - 3)


def _p_off_by_one(task: Task) -> float:
    if _fam(task) != "scheduling":
        return 0.0
    return 0.35 if task.features.get("strict") else 0.45


def _off_by_one(task: Task, action: str, rng: np.random.Generator) -> str | None:
    pattern, repl = (
        (r"where s <= t", "where s < t") if task.features.get("strict") else (r"where s < t", "where s <= t")
    )
    return _sub_line(pattern, repl)(task, action, rng)


# -- solver configurations ----------------------------------------------------------------------
def _solver_p(task: Task, unsat: float, other: float) -> float:
    if task.features.get("kind") != "solver":
        return 0.0
    return unsat if _fam(task).startswith("uuf") else other


def _set(key: str, value: Callable[[Task, dict[str, str]], str | None]) -> Apply:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        if not is_config(action):
            return None
        values = config_values(action)
        new = value(task, values)
        if new is None or values.get(key) == new:
            return None
        return set_config_value(action, key, new)

    return apply


def _low_budget(task: Task, values: dict[str, str]) -> str | None:
    allowance = int(task.features.get("max_budget", 0) or 0)
    return str(max(1, allowance // 3)) if allowance else None


def _over_budget(task: Task, values: dict[str, str]) -> str | None:
    allowance = int(task.features.get("max_budget", 0) or 0)
    return str(allowance * 4) if allowance else None


OPERATORS: tuple[ErrorOperator, ...] = (
    ErrorOperator(
        "missing_at_most_one", _p_missing_amo, _sub_line(r"^(\s*)exactly(_one| \d+)", r"\1at_least\2")
    ),
    ErrorOperator("missing_at_least_one", _p_missing_alo, _sub_line(r"^(\s*)exactly_one", r"\1at_most_one")),
    ErrorOperator(
        "full_board_rows",
        lambda t: 0.45 if _fam(t) == "partial_queens" else 0.0,
        _sub_line(r"^(\s*)at_most_one q\[r\]\[\*\]", r"\1exactly_one q[r][*]"),
    ),
    ErrorOperator(
        "capacity_ignored",
        lambda t: 0.4 if _fam(t) == "pigeonhole" and int(t.features.get("capacity", 1)) > 1 else 0.0,
        _sub_line(r"^(\s*)at_most \d+ sit", r"\1at_most_one sit"),
    ),
    ErrorOperator(
        "wrong_colour", _p_wrong_colour, _sub_line(r"color\[v\]\[c\]", "color[v][c+1]", only_with="not_both")
    ),
    ErrorOperator("off_by_one", _p_off_by_one, _off_by_one),
    ErrorOperator(
        "weak_solver", lambda t: _solver_p(t, 0.35, 0.2), _set("solver", lambda t, v: "maplechrono")
    ),
    ErrorOperator("budget_too_low", lambda t: _solver_p(t, 0.45, 0.2), _set("budget", _low_budget)),
    ErrorOperator("budget_over_allowance", lambda t: _solver_p(t, 0.08, 0.08), _set("budget", _over_budget)),
    ErrorOperator(
        "no_budget_solver", lambda t: _solver_p(t, 0.05, 0.05), _set("solver", lambda t, v: "lingeling")
    ),
    ErrorOperator("forced_phase", lambda t: _solver_p(t, 0.15, 0.15), _set("phase", lambda t, v: "true")),
)


def error_model() -> ErrorModel:
    """The SAT error model (probabilities depend on the task's family and features)."""
    return ErrorModel(operators=OPERATORS)
