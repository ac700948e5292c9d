"""Adaptation edits of a SQL query to the database it runs on now (`Domain.adaptation_edits`).

Re-verification on a changed database asks for these besides the ordinary edit operators
(construction never does). Each changes one decision unit, from the task's schema
(``features["column_types"]``: "table.column" → coarse type), never from its reference:

* a column the schema does not have → the schema column whose name contains it, or is closest to
  it (difflib ratio ≥ 0.6), every occurrence of that name (a renamed column);
* a table the schema does not have → the closest table (a renamed table);
* a column the schema stores as text, compared with a number → ``CAST(column AS INTEGER|REAL)``
  in those comparisons (numbers now stored as strings compare as strings in SQLite).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from sqlglot import exp

from cm_gym.domains.base import Edit
from cm_gym.domains.sql import sqlast


def _closest(name: str, known: list[str]) -> str | None:
    low = name.lower()
    contains = sorted((k for k in known if low in k.lower() and k.lower() != low), key=len)
    if contains:
        return contains[0]
    close = difflib.get_close_matches(low, [k.lower() for k in known], n=1, cutoff=0.6)
    return next((k for k in known if k.lower() == close[0]), None) if close else None


def _numeric_literal(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        return "REAL" if "." in node.this else "INTEGER"
    return None


def adaptation_edits(action: str, column_types: Mapping[str, str] | None) -> list[Edit]:
    """See the module docstring; [] when the query does not parse or no schema is known."""
    if not column_types:
        return []
    try:
        tree = sqlast.parse(action)
    except sqlast.SQLParseError:
        return []
    tables = sorted({key.split(".", 1)[0] for key in column_types})
    columns = sorted({key.split(".", 1)[1] for key in column_types})
    kinds: dict[str, set[str]] = {}
    for key, kind in column_types.items():
        kinds.setdefault(key.split(".", 1)[1], set()).add(kind)
    aliases = {a.alias_or_name.lower() for a in tree.find_all(exp.TableAlias, exp.Alias)}
    edits: list[Edit] = []
    seen: set[str] = set()

    def emit(new: exp.Expression, unit: str, text: str) -> None:
        sql = sqlast.to_sql(new)
        if sql not in seen and sql != sqlast.to_sql(tree):
            seen.add(sql)
            edits.append(Edit(sql, unit, text))

    for name in sorted({c.name for c in tree.find_all(exp.Column)}):
        low = name.lower()
        if not name or low in columns or low in aliases:
            continue
        target = _closest(name, columns)
        if target is None:
            continue
        new = tree.copy()
        for node in new.find_all(exp.Column):
            if node.name.lower() == low:
                node.set("this", exp.to_identifier(target))
        emit(new, f"column:{name}", f"unknown column {name} -> {target}")
    for name in sorted({t.name for t in tree.find_all(exp.Table)}):
        low = name.lower()
        if not name or low in tables:
            continue
        target = _closest(name, tables)
        if target is None:
            continue
        new = tree.copy()
        for node in new.find_all(exp.Table):
            if node.name.lower() == low:
                node.set("this", exp.to_identifier(target))
        emit(new, f"table:{name}", f"unknown table {name} -> {target}")
    for name in sorted({c.name.lower() for c in tree.find_all(exp.Column)}):
        if kinds.get(name) != {"text"}:
            continue
        new, hit = tree.copy(), False
        for node in list(sqlast.comparisons(new)):
            col, other = node.this, node.expression
            cast = (
                _numeric_literal(other) if isinstance(col, exp.Column) and col.name.lower() == name else None
            )
            if cast is not None:
                col.replace(exp.Cast(this=col.copy(), to=exp.DataType.build(cast)))
                hit = True
        if hit:
            emit(new, f"cast:{name}", f"text column {name} compared as a number")
    return edits
