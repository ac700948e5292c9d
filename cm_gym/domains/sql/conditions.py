"""SQL condition predicates (the ``sql_*`` kinds of the condition grammar).

Each is ``fn(task, args) -> bool`` and reads only the question (`task.prompt`), the schema
(`task.features["column_types"]`, else the schema text in `task.context`) and `task.env_id` —
never the reference. Arguments arrive as strings.

| kind | true when |
|---|---|
| ``sql_inclusive_wording(side="any")`` | the question asks for an inclusive bound on side lower/upper/any, with no strict one there |
| ``sql_strict_wording(side="any")`` | the question asks for a strict bound on that side, with no inclusive one there |
| ``sql_mentions_unique()`` | distinct values are asked for ("distinct", "different", "unique", ...) |
| ``sql_mentions_repeats()`` | repeated rows are asked for ("with repeats", "one row per ...") |
| ``sql_order_wording(dir)`` | the wording fixes the sort direction ``asc`` / ``desc`` |
| ``sql_asks_top_k()`` | the question asks for the top / first N rows |
| ``sql_agg_wording(fn)`` | the wording asks for COUNT / SUM / AVG / MAX / MIN |
| ``sql_null_wording(kind)`` | the wording asks for missing (``null``) or present (``not_null``) values |
| ``sql_mentions_number()`` | a number or date occurs in the question |
| ``sql_has_numeric_column(name?)`` | the schema has a numeric column (with that name, if given) |
| ``sql_has_column_type(type)`` | the schema has a column of coarse type number / text / time |
| ``sql_has_column(table, column)`` | the schema has that column (``sql_has_column("t.c")`` also works) |
| ``sql_has_table(table)`` | the schema has that table |
| ``sql_same_db(db)`` | the task runs on database `db` |
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from cm_gym.core.types import Task
from cm_gym.domains.base import PredicateFn
from cm_gym.domains.sql import wording
from cm_gym.domains.sql.schema import type_class

_TABLE_LINE = re.compile(r"^\s*([\w$]+)\((.*)\)\s*$")


def column_types(task: Task) -> Mapping[str, str]:
    """{"table.column": coarse type} from the task's features, else parsed from its context."""
    types = task.features.get("column_types") if task.features else None
    if isinstance(types, Mapping):
        return types
    out: dict[str, str] = {}
    for line in task.context.splitlines():
        m = _TABLE_LINE.match(line)
        if not m:
            continue
        for part in m.group(2).split(","):
            bits = part.split()
            if bits:
                out[f"{m.group(1).lower()}.{bits[0].lower()}"] = type_class(bits[1] if len(bits) > 1 else "")
    return out


def _arg(args: tuple[str, ...], i: int, default: str = "") -> str:
    return str(args[i]).strip().lower() if len(args) > i else default


def _side(args: tuple[str, ...]) -> str:
    side = _arg(args, 0, "any")
    return side if side in ("lower", "upper") else "any"


def _has_numeric(task: Task, args: tuple[str, ...]) -> bool:
    name = _arg(args, 0)
    return any(
        t == "number" and (not name or k.split(".", 1)[1] == name or k == name)
        for k, t in column_types(task).items()
    )


def _has_column(task: Task, args: tuple[str, ...]) -> bool:
    if len(args) == 1 and "." in str(args[0]):
        key = _arg(args, 0)
    else:
        key = f"{_arg(args, 0)}.{_arg(args, 1)}"
    return key in column_types(task)


def _has_table(task: Task, args: tuple[str, ...]) -> bool:
    table = _arg(args, 0)
    return any(k.split(".", 1)[0] == table for k in column_types(task))


def _q(fn: Callable[[str], object]) -> PredicateFn:
    return lambda task, args: bool(fn(task.prompt))


PREDICATES: dict[str, PredicateFn] = {
    "sql_inclusive_wording": lambda t, a: wording.inclusive_wording(t.prompt, _side(a)),
    "sql_strict_wording": lambda t, a: wording.strict_wording(t.prompt, _side(a)),
    "sql_mentions_unique": _q(wording.mentions_unique),
    "sql_mentions_repeats": _q(wording.mentions_repeats),
    "sql_order_wording": lambda t, a: wording.order_wording(t.prompt) == _arg(a, 0),
    "sql_asks_top_k": _q(wording.asks_top_k),
    "sql_agg_wording": lambda t, a: _arg(a, 0).upper() in wording.agg_wording(t.prompt),
    "sql_null_wording": lambda t, a: wording.null_wording(t.prompt) == _arg(a, 0).replace(" ", "_"),
    "sql_mentions_number": _q(wording.mentions_number),
    "sql_has_numeric_column": _has_numeric,
    "sql_has_column_type": lambda t, a: _arg(a, 0) in set(column_types(t).values()),
    "sql_has_column": _has_column,
    "sql_has_table": _has_table,
    "sql_same_db": lambda t, a: t.env_id.lower() == _arg(a, 0),
}


# -- local evaluation of conditions this domain writes (generic kinds mirrored) ----------------
def _generic(kind: str, task: Task, args: tuple[str, ...]) -> bool | None:
    if kind == "mentions_any":
        return wording.mentions_any(task.prompt, list(args))
    if kind == "mentions_none":
        return not wording.mentions_any(task.prompt, list(args))
    if kind == "same_env":
        return task.env_id == (args[0] if args else "")
    return None


def holds(task: Task, parts: list[tuple[str, tuple[str, ...]]]) -> bool:
    """Evaluate a conjunction of (kind, args) with the SQL kinds and the mention kinds."""
    for kind, args in parts:
        value = _generic(kind, task, args)
        if value is None:
            fn = PREDICATES.get(kind)
            if fn is None:
                raise KeyError(f"unknown predicate kind {kind!r}")
            value = fn(task, args)
        if not value:
            return False
    return True


def render(parts: list[tuple[str, tuple[str, ...]]]) -> str:
    """Condition text in the grammar: ``kind("a", "b") AND kind2()``; "none" when empty."""
    if not parts:
        return "none"
    return " AND ".join(f"{kind}({', '.join(json.dumps(a) for a in args)})" for kind, args in parts)


_PART = re.compile(r'\s*(\w+)\(((?:[^()"]|"(?:\\.|[^"\\])*")*)\)\s*(?:AND\b|$)')


def parse(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Parse condition text written by `render` back into (kind, args) parts ("none" → [])."""
    text = text.strip()
    if not text or text.lower() == "none":
        return []
    parts: list[tuple[str, tuple[str, ...]]] = []
    pos = 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None:
            raise ValueError(f"cannot parse condition at {text[pos : pos + 40]!r}")
        args = json.loads(f"[{m.group(2)}]") if m.group(2).strip() else []
        parts.append((m.group(1), tuple(str(a) for a in args)))
        pos = m.end()
    return parts
