"""Rule-based DISTIL_RECORD for SQL: a record's situation q and its applicability condition c.

The condition states the *requirement* that made a⁺ right on the source task, in words a later
question must share, e.g. for ``age > 18`` → ``age >= 18`` on "at least 18":
``mentions_any("at least", ...) AND mentions_none("more than", ...) AND sql_has_numeric_column()``
— true on other inclusive-wording questions, false on the strict look-alike. Every condition is
checked against the source task; parts that do not hold there are dropped (falling back to
``sql_same_db(db)``), so a record always applies to the task it came from. Never reads
`task.reference`.

A generic contrast of the item-4 kinds (`transfer.generic_parts`: LEFT ↔ inner JOIN, ``=`` ↔
``LIKE``, COUNT(DISTINCT x) → COUNT(*), a projected sort / filter key or aggregate dropped) gets a
condition over the question's wording only, with no table or column name, so it can hold on
another database; the base kinds' wording conditions were already database-independent. A
database-bound contrast (join key, WHERE conjunct, value casing, ...) keeps `sql_same_db` /
`sql_has_column`, and so does a generic one whose wording part is false on its own question
(nothing then says when it applies elsewhere).
"""

from __future__ import annotations

import logging
import re

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation
from cm_gym.domains.sql import conditions, contrast, sqlast, transfer, wording
from cm_gym.domains.sql.edits import Change

logger = logging.getLogger(__name__)

Part = tuple[str, tuple[str, ...]]

PHRASES: dict[tuple[str, str], tuple[str, ...]] = {
    ("lower", "inclusive"): ("at least", "no fewer than", "no less than", "or more", "or older", "or higher", "or later", "on or after", "no earlier than", "greater than or equal to"),
    ("lower", "strict"): ("more than", "greater than", "over", "above", "strictly", "older than", "higher than", "after", "later than", "exceeding"),
    ("upper", "inclusive"): ("at most", "no more than", "or less", "or fewer", "or younger", "or lower", "or earlier", "on or before", "no later than", "up to", "less than or equal to"),
    ("upper", "strict"): ("less than", "fewer than", "under", "below", "strictly", "younger than", "lower than", "before", "earlier than"),
}  # fmt: skip
NEGATION = ("not", "other than", "except", "excluding", "besides", "different from")
_CMP_SIDE = {
    "GT": ("lower", "strict"),
    "GTE": ("lower", "inclusive"),
    "LT": ("upper", "strict"),
    "LTE": ("upper", "inclusive"),
}


def _absent(task: Task, phrases: tuple[str, ...]) -> tuple[str, ...]:
    """The phrases that do not occur in the source question (safe for mentions_none)."""
    return tuple(p for p in phrases if not wording.mentions(task.prompt, p))


def _type_part(task: Task, target: str) -> list[Part]:
    types = conditions.column_types(task)
    kind = next(
        (t for k, t in types.items() if k.split(".", 1)[1] == target), "number" if "(" in target else ""
    )
    if kind == "number":
        return [("sql_has_numeric_column", ())]
    if kind == "time":
        return [("sql_has_column_type", ("time",))]
    return []


def _first_found(task: Task, phrases: tuple[str, ...]) -> str:
    hits = wording.found(task.prompt, phrases)
    return hits[0] if hits else ""


def _predicate_text(sql: str, change: Change) -> str:
    """The comparison (or clause) of `sql` the change is about, for the situation text."""
    try:
        tree = sqlast.parse(sql)
    except sqlast.SQLParseError:
        return sql
    for node in sqlast.comparisons(tree):
        if (
            sqlast.CMP_TYPES[type(node)] in (change.frm, change.to)
            and sqlast.operand_key(node) == change.target
        ):
            return sqlast.to_sql(node)
    return change.target or sql


def _cmp(task: Task, ch: Change, a_minus: str, a_plus: str) -> tuple[str, list[Part]]:
    before, after = _predicate_text(a_minus, ch), _predicate_text(a_plus, ch)
    if ch.to in _CMP_SIDE:
        side, want = _CMP_SIDE[ch.to]
        other = "strict" if want == "inclusive" else "inclusive"
        phrase = _first_found(task, PHRASES[(side, want)]) or want
        parts = [
            ("mentions_any", PHRASES[(side, want)]),
            ("mentions_none", _absent(task, PHRASES[(side, other)])),
        ]
        if want == "inclusive":
            q = f"A threshold predicate `{before}` may omit its boundary value when the question asks for an inclusive {side} bound ('{phrase}'); `{after}` includes it."
        else:
            q = f"A threshold predicate `{before}` wrongly includes its boundary value when the question asks for a strict {side} bound ('{phrase}'); `{after}` excludes it."
        return q, parts + _type_part(task, ch.target)
    if ch.to == "NEQ":
        return (
            f"An equality test `{before}` should exclude the value when the question asks for rows other than it; use `{after}`.",
            [("mentions_any", NEGATION)],
        )
    return f"An inequality `{before}` should be an equality test; use `{after}`.", [
        ("mentions_none", _absent(task, NEGATION))
    ]


def _situation(task: Task, ch: Change, a_minus: str, a_plus: str) -> tuple[str, list[Part]]:
    col = f"`{ch.target}`" if ch.target else "the selected column"
    if ch.kind == "cmp":
        return _cmp(task, ch, a_minus, a_plus)
    if ch.kind == "distinct" and ch.to == "add":
        phrase = _first_found(task, wording.UNIQUE_PHRASES) or "distinct"
        q = f"A query over {col} returns repeated values when the question asks for distinct ones ('{phrase}'); add DISTINCT."
        return q, [("mentions_any", wording.UNIQUE_PHRASES), ("mentions_none", wording.REPEAT_PHRASES)]
    if ch.kind == "distinct":
        parts: list[Part] = [("mentions_none", _absent(task, wording.UNIQUE_PHRASES))]
        if wording.mentions_repeats(task.prompt):
            parts.insert(0, ("mentions_any", wording.REPEAT_PHRASES))
        return (
            f"DISTINCT over {col} drops repeats that the question wants (one row per item); remove DISTINCT.",
            parts,
        )
    if ch.kind == "order":
        word = "descending" if ch.to == "DESC" else "ascending"
        q = f"The result is sorted {ch.frm} by {col} but the question asks for {word} order; sort {ch.to}."
        return q, [("sql_order_wording", (ch.to.lower(),))]
    if ch.kind == "limit":
        q = f"A top-k query returns LIMIT {ch.frm} rows where the question asks for {ch.to}; adjust LIMIT by {int(ch.to) - int(ch.frm):+d}."
        return q, [("sql_asks_top_k", ()), ("sql_mentions_number", ())]
    if ch.kind == "agg":
        phrase = _first_found(task, wording.AGG_WORDS.get(ch.to, ())) or ch.to.lower()
        q = f"The query aggregates {col} with {ch.frm} but the question asks for the {phrase}; use {ch.to}."
        parts = [
            ("mentions_any", wording.AGG_WORDS.get(ch.to, ())),
            ("mentions_none", _absent(task, wording.AGG_WORDS.get(ch.frm, ()))),
        ]
        return q, parts
    if ch.kind == "null":
        want = "missing" if ch.to == "IS" else "present"
        q = f"A test {ch.frm} NULL on {col} selects the wrong rows when the question asks for {want} values; use {ch.to} NULL."
        return q, [("sql_null_wording", ("null" if ch.to == "IS" else "not_null",))]
    if ch.kind == "join_key":
        return _join(task, ch)
    q = f"The condition `{ch.target}` should be {'removed' if ch.to == 'drop' else 'added'} on database {task.env_id}."
    return q, [("sql_same_db", (task.env_id,))]


def _referenced_table(task: Task, table: str, column: str) -> str:
    """The table a foreign key points to, from the "Foreign keys:" line of the schema text."""
    m = re.search(rf"\b{re.escape(table)}\.{re.escape(column)}\s*->\s*([\w$]+)\.", task.context, re.I)
    return m.group(1).lower() if m else ""


def _join(task: Task, ch: Change) -> tuple[str, list[Part]]:
    stem = [w for w in re.sub(r"_?id$", "", ch.to).split("_") if w]
    words = tuple(dict.fromkeys(x for w in (stem[:-1] if len(stem) > 1 else stem) for x in (w, w + "s")))
    if not wording.mentions_any(task.prompt, words):
        ref = _referenced_table(task, ch.target, ch.to)
        words = tuple(dict.fromkeys((ref.rstrip("s"), ref))) if ref else ()
    q = f"The join uses `{ch.target}.{ch.frm}` as its key, which links the wrong rows; the question's relation is through `{ch.target}.{ch.to}`."
    parts: list[Part] = [("sql_has_column", (ch.target, ch.to))]
    if words:
        parts.append(("mentions_any", words))
    return q, parts


def distil(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation and condition for the record a⁻ → a⁺ verified on `task`."""
    change = contrast.infer_contrast(a_minus, a_plus)
    if change is None:
        q = f"On database {task.env_id}, the query `{a_minus[:150]}` was corrected to `{a_plus[:150]}`."
        return Distillation(q, conditions.render([("sql_same_db", (task.env_id,))]))
    generic = transfer.generic_parts(task.prompt, a_minus, a_plus)
    situation, parts = generic or _situation(task, change, a_minus, a_plus)
    parts = [(k, a) for k, a in parts if a or k not in ("mentions_any", "mentions_none")]
    kept: list[Part] = []
    for part in parts:  # keep only the parts that hold on the source task
        if conditions.holds(task, [part]):
            kept.append(part)
        else:
            logger.debug("distil: dropping %s (false on source %s)", part, task.task_id)
    if not kept:
        kept = [("sql_same_db", (task.env_id,))]
    return Distillation(situation[:600], conditions.render(kept))
