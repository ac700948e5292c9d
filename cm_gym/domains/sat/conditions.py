"""SAT condition predicates and the rule-based DISTIL_RECORD.

Every predicate reads only the task's public features (never the reference), so a condition can
tell a look-alike apart: a pigeonhole correction made where pigeons outnumber holes is not shown on
a pigeonhole task with enough holes, a colouring fix does not transfer to multi-colouring, a budget
raised on ``uuf50-218`` is not carried to a family with a smaller allowance.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, PredicateFn, described
from cm_gym.domains.sat.edits import config_values, contrast_parts, is_config


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _truth(arg: str) -> bool:
    return str(arg).strip().lower() in ("true", "yes", "1")


def _above(key: str) -> PredicateFn:
    def pred(task: Task, args: tuple[str, ...]) -> bool:
        have, limit = _num(task.features.get(key)), _num(args[0]) if args else None
        return have is not None and limit is not None and have > limit

    return pred


def _at_most(key: str) -> PredicateFn:
    def pred(task: Task, args: tuple[str, ...]) -> bool:
        have, limit = _num(task.features.get(key)), _num(args[0]) if args else None
        return have is not None and limit is not None and have <= limit

    return pred


def _flag(key: str) -> PredicateFn:
    def pred(task: Task, args: tuple[str, ...]) -> bool:
        value = task.features.get(key)
        return isinstance(value, bool) and value == _truth(args[0] if args else "true")

    return pred


def _family_is(task: Task, args: tuple[str, ...]) -> bool:
    return (task.family or task.features.get("family")) in args


def _kind_is(task: Task, args: tuple[str, ...]) -> bool:
    return task.features.get("kind") in args


def _colors_per_vertex(task: Task, args: tuple[str, ...]) -> bool:
    return args != () and _num(task.features.get("colors_per_vertex")) == _num(args[0])


def _queens_fill_board(task: Task, args: tuple[str, ...]) -> bool:
    board, queens = task.features.get("board"), task.features.get("queens")
    if board is None or queens is None:
        return False
    return (board == queens) == _truth(args[0] if args else "true")


def _budget_at_least(task: Task, args: tuple[str, ...]) -> bool:
    have, need = _num(task.features.get("max_budget")), _num(args[0]) if args else None
    return have is not None and need is not None and have >= need


PREDICATES: dict[str, PredicateFn] = {
    "sat_kind_is": described(_kind_is, '("encoding"|"solver") - the SAT task kind'),
    "sat_family_is": described(
        _family_is, "(family, ...) - problem family or SATLIB family, e.g. pigeonhole, uuf50-218"
    ),
    "sat_clause_var_ratio_above": described(
        _above("clause_var_ratio"), "(x) - CNF clause/variable ratio is above x"
    ),
    "sat_vars_above": described(_above("n_vars"), "(n) - more than n variables"),
    "sat_density_above": described(_above("density"), "(x) - graph edge density is above x"),
    "sat_colors_above": described(_above("n_colors"), "(n) - more than n colours"),
    "sat_colors_per_vertex": described(_colors_per_vertex, "(m) - each vertex takes exactly m colours"),
    "sat_room_exceeded": described(
        _flag("more_items_than_room"), "(true|false) - more pigeons than hole capacity"
    ),
    "sat_capacity_at_most": described(_at_most("capacity"), "(n) - hole / slot capacity is at most n"),
    "sat_strict_precedence": described(_flag("strict"), "(true|false) - precedence is strict (earlier slot)"),
    "sat_queens_fill_board": described(_queens_fill_board, "(true|false) - one queen per row of the board"),
    "sat_budget_at_least": described(_budget_at_least, "(n) - the conflict allowance is at least n"),
    "sat_budget_at_most": described(_at_most("max_budget"), "(n) - the conflict allowance is at most n"),
}


def _q(value: Any) -> str:
    return json.dumps(str(value))


def discriminators(task: Task) -> list[str]:
    """The family-specific predicates that separate `task` from its look-alikes."""
    f = task.features
    fam = task.family or str(f.get("family", ""))
    out: list[str] = []
    if fam in ("coloring", "multicoloring") and "colors_per_vertex" in f:
        out.append(f"sat_colors_per_vertex({f['colors_per_vertex']})")
    elif fam == "pigeonhole" and "more_items_than_room" in f:
        out.append(f"sat_room_exceeded({str(bool(f['more_items_than_room'])).lower()})")
        out.append(f"sat_capacity_at_most({f.get('capacity', 1)})")
    elif fam in ("queens", "partial_queens") and "board" in f:
        out.append(f"sat_queens_fill_board({str(f.get('board') == f.get('queens')).lower()})")
    elif fam == "scheduling" and "strict" in f:
        out.append(f"sat_strict_precedence({str(bool(f['strict'])).lower()})")
        out.append(f"sat_capacity_at_most({f.get('capacity', 1)})")
    return out


def distil(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation q (kind, family, what changed) and a condition that is false on look-alikes."""
    kind = str(task.features.get("kind", "encoding"))
    fam = task.family or str(task.features.get("family", ""))
    parts = contrast_parts(a_minus, a_plus)
    change = "; ".join(parts) or "no change"
    preds = [f"sat_kind_is({_q(kind)})", f"sat_family_is({_q(fam)})"]
    if kind == "solver" and is_config(a_plus):
        budget = config_values(a_plus).get("budget", "")
        if budget.isdigit():
            preds.append(f"sat_budget_at_least({int(budget)})")
        situation = f"SAT solver configuration for {fam} ({task.features.get('n_vars', '?')} vars, ratio {task.features.get('clause_var_ratio', '?')}): {change}"
    else:
        preds.extend(discriminators(task))
        situation = f"SAT encoding of a {fam} problem: {change}"
    return Distillation(situation, " AND ".join(preds))


def condition_predicates() -> Mapping[str, PredicateFn]:
    """The SAT domain's predicate kinds."""
    return dict(PREDICATES)
