"""SQL error models of the simulator's *fitted profiles* (``llm="simulated:<profile>"``).

A profile keeps the default model's nine slips (`cm_gym.domains.sql.errormodel`), each where it can
occur and with its wording-dependent shape, scaled to a fitted rate, and adds the slips real
systems make that the default lacks (each measured on the published Spider predictions by
`cm_gym.studies.analysis.real_errors`; the fitted rates live in the profile files under
``cm_gym/llm/profiles/``, never here):

* ``extra_column`` — one more column in the select list (the ORDER BY or GROUP BY expression
  first, else a name-like column of a table in FROM);
* ``missing_column`` — one select item left out (queries with two or more);
* ``wrong_column`` — a selected column replaced by another of its table (same type first);
* ``wrong_literal`` — a string constant in WHERE with other letter case (``'dog'`` → ``'Dog'``);
* ``drop_predicate`` — one WHERE conjunct left out;
* ``left_join`` — an inner JOIN written as LEFT JOIN;
* ``drop_join`` — a table joined only for its key left out, the key read from the other side;
* ``wrong_group`` — GROUP BY another column (a selected one, e.g. the name for the id);
* ``drop_set_branch`` — UNION / INTERSECT / EXCEPT reduced to its first query;
* ``subquery_for_order`` — ``ORDER BY x LIMIT 1`` written as ``WHERE x = (SELECT MIN(x) …)``
  (right unless ties);
* ``unknown_column`` — a column name that is not in the schema (the query does not run).

``p(task) = min(0.95, rate × gate(task))``: the gate is 1 where the slip fits the query's shape
(for a default slip: its default probability over its largest default rate, so the wording cue
keeps its weight). Every slip rewrites the draft through sqlglot and renders it in the domain's
normal form, as the default slips do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from sqlglot import exp

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.sql import sqlast
from cm_gym.domains.sql.errormodel import SQLErrorRates, error_model

MAX_P = 0.95
_DEFAULT = SQLErrorRates()
#: the largest default rate of each default slip (its gate is its default probability over this)
DEFAULT_PEAK: dict[str, float] = {
    "inclusive_to_strict": _DEFAULT.inclusive_to_strict,
    "strict_to_inclusive": _DEFAULT.strict_to_inclusive,
    "missing_distinct": _DEFAULT.missing_distinct,
    "spurious_distinct": _DEFAULT.spurious_distinct,
    "wrong_join_key": _DEFAULT.wrong_join_key,
    "wrong_aggregate": _DEFAULT.wrong_aggregate,
    "reversed_order": max(
        _DEFAULT.reversed_order_asc, _DEFAULT.reversed_order_desc, _DEFAULT.reversed_order_other
    ),
    "limit_off_by_one": _DEFAULT.limit_off_by_one,
    "null_mishandling": max(_DEFAULT.null_flip_absent, _DEFAULT.null_flip_present, _DEFAULT.null_flip_other),
}
Apply = Callable[[Task, str, np.random.Generator], "str | None"]


@functools.lru_cache(maxsize=8192)
def _shape(reference: str) -> dict[str, Any]:
    """Cheap facts about a gold query that decide which added slips can occur (cached)."""
    try:
        tree = sqlast.parse(reference)
    except sqlast.SQLParseError:
        return {}
    top = tree if isinstance(tree, exp.Select) else None
    where = sqlast.where_conjuncts(tree)
    order = top.args.get("order") if top is not None else None
    return {
        "select": top is not None,
        "n_items": len(top.expressions) if top is not None else 0,
        "plain": sum(isinstance(e.unalias(), exp.Column) for e in top.expressions) if top is not None else 0,
        "n_where": len(where),
        "strings": any(
            isinstance(lit, exp.Literal) and lit.is_string for c in where for lit in c.find_all(exp.Literal)
        ),
        "joins": bool(top is not None and top.args.get("joins")),
        "group": bool(top is not None and top.args.get("group")),
        "set_op": isinstance(tree, exp.SetOperation),
        "top1": bool(
            top is not None
            and order is not None
            and len(order.expressions) == 1
            and isinstance(order.expressions[0].this, exp.Column)
            and not top.args.get("joins")
            and not top.args.get("group")
            and [int(lim.expression.this) for lim in sqlast.limits(top)] == [1]
        ),
    }


def _parse(action: str) -> exp.Expression | None:
    try:
        return sqlast.parse(action)
    except sqlast.SQLParseError:
        return None


def _tables(sel: exp.Select) -> list[tuple[str, str]]:
    """(table name, the name its columns are qualified with) of a SELECT's FROM and JOINs."""
    out = []
    for table in sel.find_all(exp.Table):
        if table.find_ancestor(exp.Select) is sel:
            out.append((table.name.lower(), table.alias or table.name))
    return out


def _columns_of(task: Task, table: str) -> list[tuple[str, str]]:
    types: Mapping[str, str] = (task.features or {}).get("column_types") or {}
    return [(k.split(".", 1)[1], v) for k, v in types.items() if k.split(".", 1)[0] == table]


def _column(name: str, qualifier: str | None) -> exp.Column:
    return exp.column(name, table=qualifier) if qualifier else exp.column(name)


def _top(action: str) -> tuple[exp.Expression, exp.Select] | None:
    tree = _parse(action)
    return (tree, tree) if isinstance(tree, exp.Select) else None


def extra_column(task: Task, action: str, rng: np.random.Generator) -> str | None:
    found = _top(action)
    if found is None:
        return None
    tree, sel = found
    shown = {sqlast.to_sql(e.unalias()).lower() for e in sel.expressions}
    if any(isinstance(e, exp.Star) for e in sel.expressions):
        return None
    cands: list[exp.Expression] = []
    for key in ("order", "group"):
        clause = sel.args.get(key)
        for e in clause.expressions if clause is not None else []:
            node = e.this if isinstance(e, exp.Ordered) else e
            if sqlast.to_sql(node).lower() not in shown:
                cands.append(node.copy())
    if not cands:
        tables = _tables(sel)
        qualify = len(tables) > 1
        for table, qual in tables[:1]:
            cols = [c for c, _ in _columns_of(task, table) if c not in shown]
            named = [c for c in cols if "name" in c] or cols
            if named:
                cands.append(_column(named[int(rng.integers(len(named)))], qual if qualify else None))
    if not cands:
        return None
    sel.set("expressions", [*sel.expressions, cands[0]])
    return sqlast.to_sql(tree)


def missing_column(task: Task, action: str, rng: np.random.Generator) -> str | None:
    found = _top(action)
    if found is None or len(found[1].expressions) < 2:
        return None
    tree, sel = found
    drop = int(rng.integers(len(sel.expressions)))
    sel.set("expressions", [e for i, e in enumerate(sel.expressions) if i != drop])
    return sqlast.to_sql(tree)


def wrong_column(task: Task, action: str, rng: np.random.Generator) -> str | None:
    found = _top(action)
    if found is None:
        return None
    tree, sel = found
    tables = dict((qual.lower(), name) for name, qual in _tables(sel))
    sites = [e for e in sel.expressions if isinstance(e.unalias(), exp.Column)]
    if not sites:
        return None
    col = sites[int(rng.integers(len(sites)))].unalias()
    table = (
        tables.get(col.table.lower())
        if col.table
        else (next(iter(tables.values())) if len(tables) == 1 else None)
    )
    if table is None:
        return None
    cols = _columns_of(task, table)
    ctype = dict(cols).get(col.name.lower())
    others = [c for c, t in cols if c != col.name.lower() and t == ctype] or [
        c for c, _ in cols if c != col.name.lower()
    ]
    if not others:
        return None
    col.set("this", exp.to_identifier(others[int(rng.integers(len(others)))]))
    return sqlast.to_sql(tree)


def wrong_literal(task: Task, action: str, rng: np.random.Generator) -> str | None:
    tree = _parse(action)
    if tree is None:
        return None
    lits = [lit for c in sqlast.where_conjuncts(tree) for lit in c.find_all(exp.Literal) if lit.is_string]
    for lit in lits:
        text = str(lit.this)
        for variant in (text.capitalize(), text.lower(), text.upper()):
            if variant != text:
                lit.replace(exp.Literal.string(variant))
                return sqlast.to_sql(tree)
    return None


def drop_predicate(task: Task, action: str, rng: np.random.Generator) -> str | None:
    tree = _parse(action)
    parts = sqlast.where_conjuncts(tree) if tree is not None else []
    if not parts:
        return None
    assert tree is not None
    drop = int(rng.integers(len(parts)))
    keep = [p for i, p in enumerate(parts) if i != drop]
    tree.set("where", exp.Where(this=exp.and_(*keep)) if keep else None)
    return sqlast.to_sql(tree)


def left_join(task: Task, action: str, rng: np.random.Generator) -> str | None:
    found = _top(action)
    joins = [j for j in (found[1].args.get("joins") or []) if not j.side] if found else []
    if not joins or found is None:
        return None
    joins[int(rng.integers(len(joins)))].set("side", "LEFT")
    return sqlast.to_sql(found[0])


def drop_join(task: Task, action: str, rng: np.random.Generator) -> str | None:
    """A table joined only for its key left out: its key read from the other side of the join."""
    found = _top(action)
    joins = list(found[1].args.get("joins") or []) if found else []
    if not joins or found is None:
        return None
    tree, sel = found
    src = sel.args.get("from_") or sel.args.get("from")
    sources = [src.this, *(j.this for j in joins)] if src is not None else []
    order = [int(i) for i in rng.permutation(len(sources))]
    for i in order:
        table = sources[i]
        if not isinstance(table, exp.Table):
            continue
        qual = (table.alias or table.name).lower()
        join = joins[0] if i == 0 else joins[i - 1]
        eqs = [e for e in _on_equalities(join) if qual in (e.this.table.lower(), e.expression.table.lower())]
        if len(eqs) != 1:
            continue
        mine, other = (eqs[0].this, eqs[0].expression)
        if mine.table.lower() != qual:
            mine, other = other, mine
        on = join.args.get("on")
        used = [
            c
            for c in sel.find_all(exp.Column)
            if c.table.lower() == qual and not (on and c.find_ancestor(exp.Join) is join)
        ]
        if any(c.name.lower() != mine.name.lower() for c in used) or any(
            not c.table for c in sel.find_all(exp.Column)
        ):
            continue
        for col in used:
            col.replace(other.copy())
        if i == 0:
            sel.set("from_" if "from_" in sel.args else "from", exp.From(this=joins[0].this.copy()))
        sel.set("joins", [j for j in joins if j is not join] or None)
        return sqlast.to_sql(tree)
    return None


def _on_equalities(join: exp.Join) -> list[exp.EQ]:
    on = join.args.get("on")
    return [e for e in (on.find_all(exp.EQ) if on is not None else []) if sqlast.is_column_pair(e)]


def wrong_group(task: Task, action: str, rng: np.random.Generator) -> str | None:
    found = _top(action)
    if found is None or found[1].args.get("group") is None:
        return None
    tree, sel = found
    keys = {sqlast.to_sql(k).lower() for k in sel.args["group"].expressions}
    plain = [e.unalias() for e in sel.expressions if isinstance(e.unalias(), exp.Column)]
    others = [c for c in plain if sqlast.to_sql(c).lower() not in keys]
    if not others:
        return None
    sel.args["group"].set("expressions", [others[int(rng.integers(len(others)))].copy()])
    return sqlast.to_sql(tree)


def drop_set_branch(task: Task, action: str, rng: np.random.Generator) -> str | None:
    tree = _parse(action)
    if not isinstance(tree, exp.SetOperation):
        return None
    return sqlast.to_sql(tree.this)


def subquery_for_order(task: Task, action: str, rng: np.random.Generator) -> str | None:
    if not _shape(action).get("top1"):
        return None
    found = _top(action)
    assert found is not None
    tree, sel = found
    key = sel.args["order"].expressions[0]
    tables = _tables(sel)
    if len(tables) != 1:
        return None
    agg = exp.Max if key.args.get("desc") else exp.Min
    sub = exp.select(agg(this=key.this.copy())).from_(exp.to_table(tables[0][0]))
    cond = exp.EQ(this=key.this.copy(), expression=exp.Subquery(this=sub))
    where = sel.args.get("where")
    sel.set("where", exp.Where(this=exp.and_(where.this, cond) if where is not None else cond))
    sel.set("order", None)
    sel.set("limit", None)
    return sqlast.to_sql(tree)


def unknown_column(task: Task, action: str, rng: np.random.Generator) -> str | None:
    found = _top(action)
    if found is None:
        return None
    tree, sel = found
    known = {k.split(".", 1)[1] for k in ((task.features or {}).get("column_types") or {})}
    cols = [c for e in sel.expressions for c in e.find_all(exp.Column) if c.name]
    if not cols:
        return None
    col = cols[int(rng.integers(len(cols)))]
    for wrong in (col.name + "_name", col.name + "s", col.name + "_value"):
        if wrong.lower() not in known:
            col.set("this", exp.to_identifier(wrong))
            return sqlast.to_sql(tree)
    return None


#: added slips: name → (gate on the gold query's shape, the slip)
ADDED: dict[str, tuple[Callable[[dict[str, Any]], bool], Apply]] = {
    "drop_set_branch": (lambda s: bool(s.get("set_op")), drop_set_branch),
    "subquery_for_order": (lambda s: bool(s.get("top1")), subquery_for_order),
    "extra_column": (lambda s: bool(s.get("select")), extra_column),
    "missing_column": (lambda s: s.get("n_items", 0) >= 2, missing_column),
    "wrong_column": (lambda s: s.get("plain", 0) >= 1, wrong_column),
    "wrong_literal": (lambda s: bool(s.get("strings")), wrong_literal),
    "drop_predicate": (lambda s: s.get("n_where", 0) >= 1, drop_predicate),
    "left_join": (lambda s: bool(s.get("joins")), left_join),
    "drop_join": (lambda s: bool(s.get("joins")), drop_join),
    "wrong_group": (lambda s: bool(s.get("group")), wrong_group),
    "unknown_column": (lambda s: bool(s.get("select")), unknown_column),
}
OPERATORS: tuple[str, ...] = (*DEFAULT_PEAK, *ADDED)
#: the sub-kind (`cm_gym.studies.analysis.real_errors_sql`) each slip produces: what the fit matches
TARGETS: dict[str, str] = {
    "inclusive_to_strict": "predicate:changed",
    "strict_to_inclusive": "predicate:changed",
    "missing_distinct": "distinct:dropped",
    "spurious_distinct": "distinct:added",
    "wrong_join_key": "join:condition",
    "wrong_aggregate": "aggregate",
    "reversed_order": "ordering",
    "limit_off_by_one": "limit",
    "null_mishandling": "predicate:changed",
    "drop_set_branch": "set_operation",
    "subquery_for_order": "nesting",
    "extra_column": "column:extra",
    "missing_column": "column:missing",
    "wrong_column": "column:wrong",
    "wrong_literal": "literal",
    "drop_predicate": "predicate:dropped",
    "left_join": "join:type",
    "drop_join": "join:tables",
    "wrong_group": "grouping",
    "unknown_column": "does_not_run",
}


def initial_rates() -> dict[str, float]:
    """Where a fit starts: each default slip at its largest default rate, each added one at 0.1."""
    return {name: DEFAULT_PEAK.get(name, 0.1) for name in OPERATORS}


def gate(name: str, task: Task, default: ErrorOperator | None = None) -> float:
    """Where slip `name` can occur on `task`, in [0, 1] (see the module doc)."""
    if name in ADDED:
        return 1.0 if ADDED[name][0](_shape(task.reference)) else 0.0
    if default is None:
        raise KeyError(name)
    return default.probability(task) / DEFAULT_PEAK[name]


def profile_error_model(params: Mapping[str, Any]) -> ErrorModel:
    """The `ErrorModel` of a fitted SQL profile: ``params["rates"]`` maps slip names of
    `OPERATORS` to rates (a slip left out never fires); the default's retry and revision rates."""
    rates = {str(k): float(v) for k, v in (params.get("rates") or {}).items()}
    unknown = sorted(set(rates) - set(OPERATORS))
    if unknown:
        raise ValueError(
            f"unknown SQL slip(s) in the profile: {', '.join(unknown)}; known: {', '.join(OPERATORS)}"
        )
    base = error_model()
    defaults = {op.name: op for op in base.operators}

    def prob(name: str) -> Callable[[Task], float]:
        rate, op = rates.get(name, 0.0), defaults.get(name)
        return lambda t: min(MAX_P, rate * gate(name, t, op)) if rate > 0 else 0.0

    ordered = ("drop_set_branch", "subquery_for_order", *DEFAULT_PEAK, *list(ADDED)[2:])
    ops = tuple(
        ErrorOperator(name, prob(name), defaults[name].apply if name in defaults else ADDED[name][1])
        for name in ordered
    )
    return ErrorModel(operators=ops, fix_prob=base.fix_prob, revision=base.revision)
