"""Question/SQL template families of the generated benchmark, each building a look-alike *pair*.

A builder takes the database connections and a seeded RNG and returns a `Pair` (or None when the
drawn slot cannot give a valid pair). Thresholds are drawn from values that exist in the data, so
the inclusive and strict readings of a bound always select different rows; `generated.py` checks
that both gold queries run and that their results differ.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cm_gym.domains.sql import templates as T

OPS = {
    ("lower", "inclusive"): ">=",
    ("lower", "strict"): ">",
    ("upper", "inclusive"): "<=",
    ("upper", "strict"): "<",
}


@dataclass(frozen=True)
class Item:
    """One task before it becomes a `Task`: question, gold SQL, variant label."""

    question: str
    sql: str
    variant: str


@dataclass(frozen=True)
class Pair:
    family: str
    db: str
    a: Item
    b: Item | None = None


Conns = dict[str, sqlite3.Connection]
Builder = Callable[[Conns, random.Random], "Pair | None"]


def _lit(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else repr(v)


def _fmt(v: Any) -> str:
    return v if isinstance(v, str) else (str(int(v)) if float(v).is_integer() else repr(v))


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _values(conn: sqlite3.Connection, sql: str) -> list[Any]:
    return [r[0] for r in conn.execute(sql).fetchall()]


def _threshold(rng: random.Random, values: list[Any], side: str) -> Any | None:
    """A value that occurs in the data with values on both sides of it (middle 60%)."""
    distinct = sorted(set(values))
    if len(distinct) < 3:
        return None
    lo, hi = max(1, int(len(distinct) * 0.2)), min(len(distinct) - 2, int(len(distinct) * 0.8))
    return distinct[rng.randint(lo, max(lo, hi))]


def _side(rng: random.Random, p_lower: float = 0.6) -> str:
    return "lower" if rng.random() < p_lower else "upper"


def _bound_pair(
    rng: random.Random, kind: str, side: str, fill: Callable[[str], str], make_sql: Callable[[str], str]
) -> tuple[Item, Item]:
    items = []
    for strictness in ("inclusive", "strict"):
        surface = rng.choice(T.BOUND[kind][(side, strictness)])
        items.append(Item(fill(surface), make_sql(OPS[(side, strictness)]), strictness))
    return items[0], items[1]


# -- boundary families ---------------------------------------------------------------------------
def boundary(conns: Conns, rng: random.Random, date: bool = False, side: str | None = None) -> Pair | None:
    slots = [s for s in T.NUM_SLOTS if (s.kind == "date") == date]
    slot = rng.choice(slots)
    side = side or _side(rng, 0.5)
    vals = _values(conns[slot.db], f"SELECT {slot.column} FROM {slot.table} WHERE {slot.column} IS NOT NULL")
    v = _threshold(rng, vals, side)
    if v is None:
        return None
    lead = rng.choice(T.LEADS).format(labels=slot.labels)

    def fill(surface: str) -> str:
        cond = surface.format(v=_fmt(v))
        if slot.kind == "generic":
            return f"{lead} {slot.entity} whose {slot.noun} is {cond}."
        if slot.kind == "age":
            return f"{lead} {slot.entity} {cond}."
        return f"{lead} {slot.entity} {slot.noun} {cond}."

    def make_sql(op: str) -> str:
        return f"SELECT {slot.label} FROM {slot.table} WHERE {slot.column} {op} {_lit(v)}"

    a, b = _bound_pair(rng, slot.kind if slot.kind != "generic" else "generic", side, fill, make_sql)
    family = "boundary_date" if date else f"boundary_{side}"
    return Pair(family, slot.db, a, b)


def boundary_lower(conns: Conns, rng: random.Random) -> Pair | None:
    return boundary(conns, rng, side="lower")


def boundary_upper(conns: Conns, rng: random.Random) -> Pair | None:
    return boundary(conns, rng, side="upper")


def boundary_date(conns: Conns, rng: random.Random) -> Pair | None:
    return boundary(conns, rng, date=True)


def group_having(conns: Conns, rng: random.Random) -> Pair | None:
    side = _side(rng, 0.65)
    if rng.random() < 0.5:
        db, table, col, groups, counted = rng.choice(T.GROUPS)
        base = f"SELECT {col} FROM {table} GROUP BY {col}"
        counts = _values(conns[db], f"SELECT COUNT(*) FROM {table} GROUP BY {col}")
    else:
        idx, counted = rng.choice(T.LINK_GROUPS)
        link = T.LINKS[idx]
        db, groups = link.db, link.parents
        base = (
            f"SELECT T1.{link.parent_label} FROM {link.parent} AS T1 JOIN {link.child} AS T2 "
            f"ON T1.{link.pk} = T2.{link.fk} GROUP BY T1.{link.pk}"
        )
        counts = _values(conns[db], f"SELECT COUNT(*) FROM {link.child} GROUP BY {link.fk}")
    v = _threshold(rng, counts, side)
    if v is None:
        return None
    shape = rng.choice(
        ("Which {g} have {c} {n}?", "List the {g} that have {c} {n}.", "Find the {g} with {c} {n}.")
    )

    def fill(surface: str) -> str:
        return shape.format(g=groups, c=surface.format(v=v), n=counted)

    a, b = _bound_pair(rng, "count", side, fill, lambda op: f"{base} HAVING COUNT(*) {op} {v}")
    return Pair("group_having", db, a, b)


def boundary_join(conns: Conns, rng: random.Random) -> Pair | None:
    idx, col, noun = rng.choice(T.JOIN_FILTERS)
    link = T.LINKS[idx]
    side = _side(rng, 0.7)
    vals = _values(conns[link.db], f"SELECT {col} FROM {link.child} WHERE {col} IS NOT NULL")
    v = _threshold(rng, vals, side)
    if v is None:
        return None
    labels = f"{link.parent_label}s"
    shape = rng.choice(
        (
            "List the {labels} of {parents} that have {art} {child} whose {noun} is {cond} (list each {label} only once).",
            "Which {parents} have {art} {child} whose {noun} is {cond}? Give each {label} only once.",
        )
    )

    def fill(surface: str) -> str:
        return shape.format(
            labels=labels, parents=link.parents, art=_article(link.child_one), child=link.child_one,
            noun=noun, cond=surface.format(v=_fmt(v)), label=link.parent_label,
        )  # fmt: skip

    def make_sql(op: str) -> str:
        return (
            f"SELECT DISTINCT T1.{link.parent_label} FROM {link.parent} AS T1 JOIN {link.child} AS T2 "
            f"ON T1.{link.pk} = T2.{link.fk} WHERE T2.{col} {op} {_lit(v)}"
        )

    a, b = _bound_pair(rng, "generic", side, fill, make_sql)
    return Pair("boundary_join", link.db, a, b)


# -- DISTINCT families ---------------------------------------------------------------------------
DISTINCT_Q = (
    "List the distinct {nouns} of {entity}.", "What are the different {nouns} of {entity}?",
    "List the unique {nouns} that appear among {entity}.", "Give the {nouns} of {entity} without duplicates.",
    "Show each {noun} of {entity} only once.",
)  # fmt: skip
REPEAT_Q = (
    "List the {noun} of every {one}, one row per {one}.", "Show the {noun} of each {one}, including duplicates.",
    "Give the {nouns} of {entity}, with repeats.", "List the {noun} of all {entity} (repeats allowed).",
)  # fmt: skip


def distinct(conns: Conns, rng: random.Random) -> Pair | None:
    s = rng.choice(T.TEXT_SLOTS)
    kw = {"noun": s.noun, "nouns": s.nouns, "entity": s.entity, "one": s.one}
    a = Item(rng.choice(DISTINCT_Q).format(**kw), f"SELECT DISTINCT {s.column} FROM {s.table}", "distinct")
    b = Item(rng.choice(REPEAT_Q).format(**kw), f"SELECT {s.column} FROM {s.table}", "repeats")
    return Pair("distinct", s.db, a, b)


def distinct_join(conns: Conns, rng: random.Random) -> Pair | None:
    link = rng.choice(T.LINKS)
    join = f"FROM {link.parent} AS T1 JOIN {link.child} AS T2 ON T1.{link.pk} = T2.{link.fk}"
    qa = rng.choice(
        (
            "Which {parents} {phrase}? List each {label} only once.",
            "List the distinct {label}s of {parents} that {phrase}.",
        )
    ).format(parents=link.parents, phrase=link.child_phrase, label=link.parent_label)
    qb = rng.choice(
        (
            "For every {one}, give the {label} of the {role}, one row per {one}.",
            "List the {label} of the {role} for each {one}, including duplicates.",
        )
    ).format(one=link.child_one, label=link.parent_label, role=link.role)
    a = Item(qa, f"SELECT DISTINCT T1.{link.parent_label} {join}", "distinct")
    b = Item(qb, f"SELECT T1.{link.parent_label} {join}", "repeats")
    return Pair("distinct_join", link.db, a, b)


def count_distinct(conns: Conns, rng: random.Random) -> Pair | None:
    s = rng.choice(T.TEXT_SLOTS)
    kw = {"noun": s.noun, "nouns": s.nouns, "entity": s.entity}
    qa = rng.choice(
        (
            "How many different {nouns} appear among {entity}?",
            "Count the distinct {nouns} of {entity}.",
            "How many unique {nouns} do the {entity} have?",
        )
    )
    qb = rng.choice(
        (
            "How many {noun} values do {entity} have, counting repeats?",
            "Count the {noun} entries of all {entity}, including duplicates.",
        )
    )
    a = Item(qa.format(**kw), f"SELECT COUNT(DISTINCT {s.column}) FROM {s.table}", "distinct")
    b = Item(qb.format(**kw), f"SELECT COUNT({s.column}) FROM {s.table}", "repeats")
    return Pair("count_distinct", s.db, a, b)


# -- aggregates, ordering, top-k -----------------------------------------------------------------
def aggregate(conns: Conns, rng: random.Random) -> Pair | None:
    slot = rng.choice([s for s in T.NUM_SLOTS if s.kind in ("generic", "age")])
    where_q, where_sql = "", ""
    filters = [t for t in T.TEXT_SLOTS if (t.db, t.table) == (slot.db, slot.table)]
    if filters and rng.random() < 0.5:
        f = rng.choice(filters)
        value = rng.choice(sorted(set(_values(conns[slot.db], f"SELECT {f.column} FROM {f.table}"))))
        where_q, where_sql = f" whose {f.noun} is {value}", f" WHERE {f.column} = {_lit(value)}"
    pair = ("MAX", "MIN") if slot.kind == "age" else rng.choice((("AVG", "SUM"), ("MAX", "MIN")))
    items = []
    for fn in pair:
        q = rng.choice(T.AGG_SURFACES[fn]).format(noun=slot.noun, entity=slot.entity, where=where_q)
        items.append(Item(q, f"SELECT {fn}({slot.column}) FROM {slot.table}{where_sql}", fn.lower()))
    return Pair("aggregate", slot.db, items[0], items[1])


def _colnoun(slot: T.NumSlot) -> str:
    special = {"founded": "founding year", "year": "publication year"}
    if slot.kind in ("generic", "age"):
        return slot.noun
    return special.get(slot.column, slot.column.replace("_", " "))


_SMALL = {"orders", "enrollments", "loans"}


def _has_nulls(conns: Conns, slot: T.NumSlot) -> bool:
    sql = f"SELECT COUNT(*) FROM {slot.table} WHERE {slot.column} IS NULL"
    return conns[slot.db].execute(sql).fetchone()[0] > 0


def order(conns: Conns, rng: random.Random) -> Pair | None:
    slot = rng.choice([s for s in T.NUM_SLOTS if s.table not in _SMALL])
    if _has_nulls(conns, slot):  # where NULLs sort is a different question
        return None
    surfaces = T.ORDER_SURFACES.get(slot.kind, T.ORDER_SURFACES["generic"])
    noun = _colnoun(slot)
    items = []
    for direction in ("desc", "asc"):
        phrase = rng.choice(surfaces[direction]).format(noun=noun)
        q = f"List the {slot.labels} of {slot.entity} ordered by {noun}, {phrase} (ties broken by {slot.label.replace('_', ' ')})."
        sql = f"SELECT {slot.label} FROM {slot.table} ORDER BY {slot.column} {direction.upper()}, {slot.label} ASC"
        items.append(Item(q, sql, direction))
    return Pair("order", slot.db, items[0], items[1])


def topk(conns: Conns, rng: random.Random) -> Pair | None:
    slot = rng.choice([s for s in T.NUM_SLOTS if s.kind in ("generic", "age")])
    if _has_nulls(conns, slot):
        return None
    surfaces = T.TOPK_SURFACES.get(slot.kind, T.TOPK_SURFACES["generic"])
    k = rng.randint(2, 6)
    items = []
    for direction in ("desc", "asc"):
        phrase = rng.choice(surfaces[direction]).format(k=k, entity=slot.entity, noun=slot.noun)
        q = f"List the {slot.labels} of {phrase} (ties broken by {slot.label.replace('_', ' ')})."
        sql = f"SELECT {slot.label} FROM {slot.table} ORDER BY {slot.column} {direction.upper()}, {slot.label} ASC LIMIT {k}"
        items.append(Item(q, sql, direction))
    return Pair("topk", slot.db, items[0], items[1])


# -- NULL handling and join keys ------------------------------------------------------------------
def null_check(conns: Conns, rng: random.Random) -> Pair | None:
    s = rng.choice(T.NULL_SLOTS)
    lead = rng.choice(T.LEADS).format(labels=s.labels)
    a = Item(
        f"{lead} {s.entity} {rng.choice(s.absent)}.",
        f"SELECT {s.label} FROM {s.table} WHERE {s.column} IS NULL",
        "null",
    )
    b = Item(
        f"{lead} {s.entity} {rng.choice(s.present)}.",
        f"SELECT {s.label} FROM {s.table} WHERE {s.column} IS NOT NULL",
        "not_null",
    )
    return Pair("null_check", s.db, a, b)


JOIN_Q = (
    "For each {one}, give the {clabel} and the {plabel} of the {role}.",
    "List every {one}'s {clabel} together with the {plabel} of the {role}.",
    "Show the {clabel} of each {one} next to the {plabel} of the {role}.",
    "Give the {clabel} of every {one} along with the {plabel} of the {role}.",
    "For all {one} records, return the {clabel} and the {plabel} of the {role}.",
    "Pair each {one}'s {clabel} with the {plabel} of the {role}.",
)


def join_key(conns: Conns, rng: random.Random) -> Pair | None:
    link = rng.choice(T.LINKS)
    siblings = [x for x in T.LINKS if (x.db, x.child) == (link.db, link.child) and x != link]
    shape = rng.choice(JOIN_Q)

    def item(x: T.Link) -> Item:
        q = shape.format(one=x.child_one, clabel=x.child_label_noun, plabel=x.parent_label, role=x.role)
        sql = (
            f"SELECT T1.{x.child_label}, T2.{x.parent_label} FROM {x.child} AS T1 JOIN {x.parent} AS T2 "
            f"ON T1.{x.fk} = T2.{x.pk}"
        )
        return Item(q, sql, x.fk)

    return Pair("join_key", link.db, item(link), item(siblings[0]) if siblings else None)


#: family → (builder, share of the benchmark's tasks)
FAMILIES: dict[str, tuple[Builder, float]] = {
    "boundary_lower": (boundary_lower, 0.17),
    "boundary_upper": (boundary_upper, 0.10),
    "boundary_date": (boundary_date, 0.07),
    "group_having": (group_having, 0.08),
    "boundary_join": (boundary_join, 0.06),
    "distinct": (distinct, 0.07),
    "distinct_join": (distinct_join, 0.04),
    "count_distinct": (count_distinct, 0.04),
    "aggregate": (aggregate, 0.08),
    "order": (order, 0.07),
    "topk": (topk, 0.08),
    "null_check": (null_check, 0.06),
    "join_key": (join_key, 0.08),
}
