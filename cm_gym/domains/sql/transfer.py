"""Lessons that can transfer (issue 32 item 5): generic contrasts, their database-independent
condition and their executable transform.

A contrast is *generic* when its edit kind says nothing about the source database: a comparison
made inclusive or strict, an aggregate swapped, DISTINCT added or removed, a sort direction, a
LIMIT, IS [NOT] NULL, and the item-4 kinds LEFT ↔ inner JOIN, ``=`` ↔ ``LIKE``,
COUNT(DISTINCT x) → COUNT(*) and a dropped projected column whose *role* in a⁻ is structural (the
sort key, a filter column, an aggregate). It is *database-bound* when re-applying it needs the
source database's names or values: a join key, a WHERE conjunct added or dropped, a projected
column added, COUNT(*) → COUNT(DISTINCT x) (x a source column), a value re-cased to the source
column's spelling, and a dropped column with no structural role.

For a generic contrast `generic_parts` gives the wording part of the condition (the question
asks for what a⁺ does; `mentions_any` / `mentions_none` phrase lists, never a table or column
name); the draft's shape is checked by the transform itself (`apply_transform` finds a site, or
the record does not apply: `Domain.record_applies`, which the extended observation reads).
`transform_of` is the executable transform stored on the record: the edit kind and the
site-free parameters (JSON), so applying it to another draft needs no LLM and no source column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sqlglot import exp

from cm_gym.core.boundedjson import loads as bounded_loads
from cm_gym.domains.sql import contrast, edits_local, sqlast, wording
from cm_gym.domains.sql.edits import Change

Part = tuple[str, tuple[str, ...]]

#: Condition predicates that name the source database, its tables or columns.
DB_BOUND_PREDICATES = frozenset({"sql_same_db", "sql_has_column", "sql_has_table", "same_env"})
#: Base kinds whose transfer needs no source name (`contrast._apply` picks the first site).
_GENERIC_BASE = frozenset({"cmp", "agg", "distinct", "order", "limit", "null"})
#: Item-4 keys whose transform is site-free (``project:drop`` also needs a structural role).
_GENERIC_LOCAL = frozenset(
    {
        "join_type:LEFT->INNER",
        "join_type:INNER->LEFT",
        "like:EQ->LIKE",
        "like:LIKE->EQ",
        "count:DISTINCT->STAR",
    }
)
#: Roles of a dropped projected column that another draft can have too.
DROP_ROLES = ("order_key", "filter_key", "aggregate")

SORT_WORDS = ("sort", "sorted", "order", "ordered", "ascending", "descending", "from high to low",
              "from low to high", "alphabetical", "alphabetically")  # fmt: skip
FILTER_WORDS = ("whose", "where", "with a", "with an", "that have", "who have", "which have",
                "higher than", "lower than", "more than", "less than", "at least", "at most")  # fmt: skip
GROUP_WORDS = ("each", "every", "per", "corresponding", "for all")
UNMATCHED_WORDS = ("including", "even", "without", "zero", "no", "none", "or not",
                   "less than", "fewer than", "at most")  # fmt: skip
SUBSTRING_WORDS = ("contain", "contains", "containing", "includes", "substring", "like",
                   "start with", "starts with", "starting with", "begin with", "end with",
                   "ends with", "ending with", "the word", "the string")  # fmt: skip


def _drop_role(a_minus: str, label: str) -> str:
    """The structural role of the projected column `label` of a⁻ ("" when it has none)."""
    try:
        tree = sqlast.parse(a_minus)
    except sqlast.SQLParseError:
        return ""
    if not isinstance(tree, exp.Select):
        return ""
    node = next((e for e in tree.expressions if edits_local._column_label(e) == label), None)
    return _role_of(tree, node) if node is not None else ""


def _role_of(sel: exp.Select, node: exp.Expression) -> str:
    inner = node.unalias()
    if isinstance(inner, exp.AggFunc):
        return f"aggregate:{sqlast.AGG_TYPES.get(type(inner), type(inner).__name__.upper())}"
    if not isinstance(inner, exp.Column):
        return ""
    for part, role in (("order", "order_key"), ("where", "filter_key")):
        clause = sel.args.get(part)
        if clause is not None and any(
            c.name.lower() == inner.name.lower() for c in clause.find_all(exp.Column)
        ):
            return role
    return ""


def transform_of(a_minus: str, a_plus: str) -> dict[str, str] | None:
    """The executable, site-free transform of a generic contrast (None when it is
    database-bound or not one edit): ``{"kind": <edit key>, ...}`` (`apply_transform` reads it)."""
    change = contrast.infer_contrast(a_minus, a_plus)
    if change is None:
        return None
    if change.kind in _GENERIC_BASE:
        out = {"kind": change.kind, "frm": change.frm, "to": change.to}
        out.update({k: str(v) for k, v in change.extra.items()})
        return out
    if change.key in _GENERIC_LOCAL:
        return {"kind": change.kind, "frm": change.frm, "to": change.to}
    if change.key == "project:drop":
        role = _drop_role(a_minus, change.target)
        if role.split(":")[0] in DROP_ROLES:
            return {"kind": "project", "to": "drop", "role": role}
    return None


def is_generic(a_minus: str, a_plus: str) -> bool:
    """Whether a⁻ → a⁺ is a generic contrast (it has a site-free transform)."""
    return transform_of(a_minus, a_plus) is not None


def dumps(transform: Mapping[str, str] | None) -> str:
    """The transform as the record stores it (canonical JSON; "" for none)."""
    return json.dumps(dict(transform), sort_keys=True) if transform else ""


def loads(text: str) -> dict[str, str] | None:
    """Inverse of `dumps`; None for "" or text that is not a transform."""
    try:
        data = bounded_loads(text, what="a record's transform") if text else None
    except ValueError:  # BoundedJSONError is a ValueError: too large, too deep or not JSON
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) and "kind" in data else None


def _drop_by_role(tree: exp.Expression, role: str) -> bool:
    if not isinstance(tree, exp.Select) or len(tree.expressions) < 2:
        return False
    if any(isinstance(e, exp.Star) for e in tree.expressions):
        return False
    node = next((e for e in tree.expressions if _role_of(tree, e) == role), None)
    if node is None:
        return False
    tree.set("expressions", [e for e in tree.expressions if e is not node])
    return True


def apply_transform(draft: str, transform: Mapping[str, str]) -> str | None:
    """`draft` with the transform applied at its first fitting site, or None when the draft has
    no such site (no COUNT(DISTINCT ...), no LEFT JOIN, no projected column of the role, ...)."""
    try:
        tree = sqlast.parse(draft)
    except sqlast.SQLParseError:
        return None
    before = sqlast.to_sql(tree)
    kind = transform.get("kind", "")
    if kind == "project":
        done = transform.get("to") == "drop" and _drop_by_role(tree, transform.get("role", ""))
    else:
        extra = {k: v for k, v in transform.items() if k not in ("kind", "frm", "to")}
        change = Change(kind, transform.get("frm", ""), transform.get("to", ""), "", extra)
        try:
            done = contrast._apply(tree, change, {})
        except (ValueError, TypeError, KeyError, AttributeError):
            done = False
    if not done:
        return None
    after = sqlast.to_sql(tree)
    return after if after != before else None


def _found_or_all(prompt: str, phrases: tuple[str, ...]) -> Part:
    return ("mentions_any", phrases) if wording.mentions_any(prompt, phrases) else ("mentions_any", ())


def _absent(prompt: str, phrases: tuple[str, ...]) -> Part:
    return ("mentions_none", tuple(p for p in phrases if not wording.mentions(prompt, p)))


def generic_parts(prompt: str, a_minus: str, a_plus: str) -> tuple[str, list[Part]] | None:
    """(situation, wording parts) of an item-4 generic contrast; None for other kinds (the base
    kinds keep `distil`'s own wording). A part that does not hold on the source question comes
    back empty (the caller drops it); no part names a table or a column."""
    transform = transform_of(a_minus, a_plus)
    if transform is None or transform["kind"] in _GENERIC_BASE:
        return None
    kind, to = transform["kind"], transform.get("to", "")
    count_words = wording.AGG_WORDS["COUNT"]
    if kind == "join_type" and to == "INNER":
        q = ("A LEFT JOIN keeps rows without a match (a count of 0) where the question asks only "
             "about the rows that have one; use an inner JOIN.")  # fmt: skip
        parts = [_found_or_all(prompt, GROUP_WORDS), _absent(prompt, UNMATCHED_WORDS)]
        if wording.mentions_any(prompt, count_words):
            parts.insert(1, ("mentions_any", count_words))
        return q, parts
    if kind == "join_type":
        q = ("An inner JOIN drops rows without a match where the question also asks about those "
             "(none, zero, fewer than); use a LEFT JOIN.")  # fmt: skip
        return q, [_found_or_all(prompt, UNMATCHED_WORDS)]
    if kind == "like" and to == "LIKE":
        q = "An equality test on a text value should match a substring, as the question words it; use LIKE '%v%'."
        return q, [_found_or_all(prompt, SUBSTRING_WORDS)]
    if kind == "like":
        q = "A LIKE pattern matches more rows than the exact value the question names; use =."
        return q, [
            _absent(prompt, SUBSTRING_WORDS),
            _found_or_all(prompt, ("named", "called", "titled", "is")),
        ]
    if kind == "count":
        q = ("COUNT(DISTINCT x) counts distinct values where the question counts rows (no "
             "'different' / 'distinct' in it); use COUNT(*).")  # fmt: skip
        return q, [_found_or_all(prompt, count_words), _absent(prompt, wording.UNIQUE_PHRASES)]
    role = transform.get("role", "")
    if role == "order_key":
        q = "The query also projects the column it sorts by, which the question only uses to order the answer; drop it."
        return q, [_found_or_all(prompt, SORT_WORDS + wording.DESC_SUPERLATIVES + wording.ASC_SUPERLATIVES)]
    if role == "filter_key":
        q = "The query also projects the column it filters on, which the question only uses as a condition; drop it."
        return q, [_found_or_all(prompt, FILTER_WORDS)]
    fn = role.split(":", 1)[1] if ":" in role else ""
    q = (f"The query also projects an aggregate ({fn or 'a computed value'}) that the question does not "
         "ask for; drop it.")  # fmt: skip
    parts = [_absent(prompt, wording.AGG_WORDS.get(fn, ()))]
    if fn in ("MAX", "MIN"):
        parts.append(_found_or_all(prompt, wording.DESC_SUPERLATIVES + wording.ASC_SUPERLATIVES))
    else:
        parts.append(_found_or_all(prompt, GROUP_WORDS + SORT_WORDS))
    return q, parts


def database_bound(parts: list[Part]) -> bool:
    """Whether a condition's parts name the source database, a table or a column."""
    return any(k in DB_BOUND_PREDICATES or (k == "sql_has_numeric_column" and a) for k, a in parts)
