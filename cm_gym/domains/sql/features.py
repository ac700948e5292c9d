"""`Task.features` of an SQL task, from the question wording, the schema and the reference query.

Condition predicates and the simulated LLM's error model read these, so they must not reveal the
answer beyond what the question states: wording features (`boundary`, `order_wording`, ...) come
from the question alone; structural features of the reference (`has_distinct`, `order_dir`,
`limit`, `aggs`, ...) restate what a correct reading of the question implies, and comparison
*operators* and join-key columns are deliberately left out.

Keys: family, db, boundary, boundary_side, order_wording, mentions_unique, mentions_repeats,
null_wording, agg_wording, asks_top_k, numbers, has_distinct, has_order, order_dir, has_limit,
limit, has_join, join_count, has_agg, aggs, has_group, has_having, has_null_check,
compared_columns, numeric_compared, n_comparisons, column_types.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from cm_gym.domains.sql import sqlast, wording
from cm_gym.domains.sql.schema import Schema


def question_features(question: str) -> dict[str, Any]:
    """Features read from the question wording only."""
    boundary, side = wording.boundary_kind(question)
    return {
        "boundary": boundary,
        "boundary_side": side,
        "order_wording": wording.order_wording(question),
        "mentions_unique": wording.mentions_unique(question),
        "mentions_repeats": wording.mentions_repeats(question),
        "null_wording": wording.null_wording(question),
        "agg_wording": wording.agg_wording(question),
        "asks_top_k": wording.asks_top_k(question),
        "numbers": wording.numbers(question)[:6],
    }


def query_features(sql: str, column_types: dict[str, str]) -> dict[str, Any]:
    """Structural features of the reference query (no operators, no join keys)."""
    try:
        tree = sqlast.parse(sql)
    except sqlast.SQLParseError:
        return {"parse_error": True}
    top = tree if isinstance(tree, exp.Select) else (sqlast.selects(tree) or [tree])[0]
    by_name: dict[str, str] = {}
    for key, ctype in column_types.items():
        by_name.setdefault(key.split(".", 1)[1], ctype)
    compared: list[str] = []
    numeric: list[str] = []
    for node in sqlast.comparisons(tree):
        name = sqlast.operand_key(node)
        if name not in compared:
            compared.append(name)
            agg = isinstance(node.this, exp.AggFunc)
            if agg or by_name.get(name) == "number":
                numeric.append(name)
    orders = sqlast.ordered_keys(top) if top.args.get("order") is not None else []
    limits = sqlast.limits(top)
    aggs = [sqlast.AGG_TYPES[type(a)] for a in sqlast.aggregates(tree)]
    distinct = any(s.args.get("distinct") for s in sqlast.selects(tree)) or any(
        isinstance(a.this, exp.Distinct) for a in sqlast.aggregates(tree)
    )
    return {
        "has_distinct": bool(distinct),
        "has_order": bool(orders),
        "order_dir": ("DESC" if orders[0].args.get("desc") else "ASC") if orders else None,
        "has_limit": bool(limits),
        "limit": int(limits[0].expression.this) if limits else None,
        "has_join": bool(list(tree.find_all(exp.Join))),
        "join_count": len(list(tree.find_all(exp.Join))),
        "has_agg": bool(aggs),
        "aggs": sorted(set(aggs)),
        "has_group": tree.find(exp.Group) is not None,
        "has_having": tree.find(exp.Having) is not None,
        "has_null_check": bool(sqlast.null_checks(tree)),
        "compared_columns": compared,
        "numeric_compared": numeric,
        "n_comparisons": len(sqlast.comparisons(tree)),
    }


def classify_family(qf: dict[str, Any], rf: dict[str, Any]) -> str:
    """A coarse family for tasks without a template family (e.g. Spider)."""
    if qf.get("boundary") and rf.get("numeric_compared"):
        return "boundary"
    if rf.get("has_null_check"):
        return "null_check"
    if rf.get("has_limit") and rf.get("has_order"):
        return "topk"
    if rf.get("has_having"):
        return "group_having"
    if rf.get("has_distinct"):
        return "distinct"
    if rf.get("has_order"):
        return "order"
    if rf.get("has_agg"):
        return "aggregate"
    if rf.get("has_join"):
        return "join"
    return "select"


def task_features(question: str, sql: str, schema: Schema, family: str = "") -> dict[str, Any]:
    """All features of one task (JSON-serialisable)."""
    column_types = schema.column_types()
    qf = question_features(question)
    rf = query_features(sql, column_types)
    out: dict[str, Any] = {"family": family or classify_family(qf, rf), "db": schema.db_id}
    out.update(qf)
    out.update(rf)
    out["column_types"] = column_types
    return out
