"""The simulated frozen LLM's SQL error model: systematic, feature-dependent slips.

Each `ErrorOperator` has a probability that depends only on task features (question wording and
the structure the question implies), so every task that shares those features is exposed to the
same slip — a correction verified on one task is therefore worth reusing on another, and a
look-alike task (same surface, other requirement) is where reusing it hurts. The slips are applied
to the reference by the simulated LLM's *drafting* only, through the same AST edits as
`edits.py`, and rendered in the same normal form.

All rates live in `SQLErrorRates` (tunable; `error_model(rates)`); the defaults are documented on
its fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from sqlglot import exp

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator, RevisionRates
from cm_gym.domains.sql import edits, sqlast


@dataclass(frozen=True)
class SQLErrorRates:
    """Per-draft slip probabilities of the simulated LLM (each applies only where it fits)."""

    inclusive_to_strict: float = 0.6  # "at least 18" written as > 18 (inclusive wording)
    strict_to_inclusive: float = 0.15  # "more than 18" written as >= 18 (strict wording)
    missing_distinct: float = 0.5  # DISTINCT dropped where the question needs it
    spurious_distinct: float = 0.25  # DISTINCT added where the question wants repeats
    wrong_join_key: float = 0.35  # a join on another *_id column of the same table
    wrong_aggregate: float = 0.3  # SUM<->AVG, MAX<->MIN
    reversed_order_asc: float = 0.35  # ascending asked, DESC written
    reversed_order_desc: float = 0.1  # descending asked, ASC written
    reversed_order_other: float = 0.15  # direction implied (no explicit wording)
    limit_off_by_one: float = 0.3  # LIMIT n-1 (LIMIT 2 for n = 1)
    null_flip_absent: float = 0.4  # "without a manager" written as IS NOT NULL
    null_flip_present: float = 0.15  # "has a manager" written as IS NULL
    null_flip_other: float = 0.2
    fix_react: float = 0.30  # chance a fed-back retry fixes each remaining slip (ReAct)
    fix_reflexion: float = 0.45  # same, with a written reflection (Reflexion)

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _parse(action: str) -> exp.Expression | None:
    try:
        return sqlast.parse(action)
    except sqlast.SQLParseError:
        return None


def _flip_first(action: str, ops: tuple[str, ...]) -> str | None:
    tree = _parse(action)
    if tree is None:
        return None
    for node in sqlast.comparisons(tree):
        name = sqlast.CMP_TYPES[type(node)]
        if name in ops:
            node.replace(
                sqlast.CMP_BY_NAME[sqlast.CMP_FLIP[name]](this=node.this, expression=node.expression)
            )
            return sqlast.to_sql(tree)
    return None


def _side_ops(task: Task, lower: str, upper: str) -> tuple[str, ...]:
    side = task.features.get("boundary_side")
    if side == "lower":
        return (lower,)
    if side == "upper":
        return (upper,)
    return (lower, upper)


def _first_edit(
    action: str, kind: str, task: Task, pred: Callable[[edits.RawEdit], bool] = lambda e: True
) -> str | None:
    for edit in edits.raw_edits(action, task.features.get("column_types")):
        if edit.unit.startswith(kind + ":") and pred(edit):
            return edit.text
    return None


#: How the simulated LLM treats a shown SQL record: `RevisionRates`' defaults, shared by every
#: built-in domain — one least-squares fit pooled over SQL, SAT and SMT to the paper's Fig. 4d and
#: App. E.3 (apply 0.665, overapply 0.205, unrelated_disturb 0.094, match/analogous disturb 0; where
#: they come from: `RevisionRates`, `cm_gym.studies.analysis.calibrate`, the README). A SQL-only fit:
#: `cm-gym calibrate --fit --benchmark SQL`, loaded with --revision-rates.
SQL_REVISION = RevisionRates()


def error_model(rates: SQLErrorRates | None = None, revision: RevisionRates | None = None) -> ErrorModel:
    """The SQL domain's `ErrorModel` (see `SQLErrorRates` for the slips, `SQL_REVISION` for how
    a revision treats a shown record)."""
    r = rates or SQLErrorRates()
    revision = revision or SQL_REVISION

    def f(task: Task, key: str, default: Any = None) -> Any:
        return task.features.get(key, default) if task.features else default

    def order_p(task: Task) -> float:
        if not f(task, "has_order"):
            return 0.0
        wording = f(task, "order_wording")
        return {"asc": r.reversed_order_asc, "desc": r.reversed_order_desc}.get(
            wording, r.reversed_order_other
        )

    def null_p(task: Task) -> float:
        if not f(task, "has_null_check"):
            return 0.0
        wording = f(task, "null_wording")
        return {"null": r.null_flip_absent, "not_null": r.null_flip_present}.get(wording, r.null_flip_other)

    def limit_apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        tree = _parse(action)
        limits = sqlast.limits(tree) if tree is not None else []
        if not limits:
            return None
        n = int(limits[0].expression.this)
        limits[0].set("expression", sqlast.literal_int(n - 1 if n > 1 else n + 1))
        return sqlast.to_sql(tree)

    def agg_apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        return _first_edit(action, "agg", task, lambda e: e.change.frm in ("SUM", "AVG", "MAX", "MIN"))

    operators = (
        ErrorOperator(
            "inclusive_to_strict",
            lambda t: r.inclusive_to_strict if f(t, "boundary") in ("inclusive", "mixed") else 0.0,
            lambda t, a, rng: _flip_first(a, _side_ops(t, "GTE", "LTE")),
        ),
        ErrorOperator(
            "strict_to_inclusive",
            lambda t: r.strict_to_inclusive if f(t, "boundary") in ("strict", "mixed") else 0.0,
            lambda t, a, rng: _flip_first(a, _side_ops(t, "GT", "LT")),
        ),
        ErrorOperator(
            "missing_distinct",
            lambda t: r.missing_distinct if f(t, "has_distinct") else 0.0,
            lambda t, a, rng: _first_edit(a, "distinct", t, lambda e: e.change.to == "remove"),
        ),
        ErrorOperator(
            "spurious_distinct",
            lambda t: r.spurious_distinct if f(t, "mentions_repeats") and not f(t, "has_distinct") else 0.0,
            lambda t, a, rng: _first_edit(a, "distinct", t, lambda e: e.change.to == "add"),
        ),
        ErrorOperator(
            "wrong_join_key",
            lambda t: r.wrong_join_key if f(t, "has_join") else 0.0,
            lambda t, a, rng: _first_edit(a, "join_key", t),
        ),
        ErrorOperator(
            "wrong_aggregate",
            lambda t: r.wrong_aggregate if set(f(t, "aggs", [])) & {"SUM", "AVG", "MAX", "MIN"} else 0.0,
            agg_apply,
        ),
        ErrorOperator("reversed_order", order_p, lambda t, a, rng: _first_edit(a, "order", t)),
        ErrorOperator(
            "limit_off_by_one", lambda t: r.limit_off_by_one if f(t, "has_limit") else 0.0, limit_apply
        ),
        ErrorOperator("null_mishandling", null_p, lambda t, a, rng: _first_edit(a, "null", t)),
    )
    return ErrorModel(
        operators=operators,
        fix_prob={"react": r.fix_react, "reflexion": r.fix_reflexion},
        revision=revision,
    )
