"""Classify a wrong SQL answer by an AST diff against the gold query (sqlglot, SQLite dialect).

Taxonomy (`SQL_KINDS`; one answer may have several kinds):

* ``column`` — the select list has another, an extra or a missing column (the evaluator accepts
  a column permutation, so order alone is no difference);
* ``aggregate`` — the same columns under another aggregate function (or an aggregate added or
  dropped around the same column);
* ``distinct`` — ``SELECT DISTINCT`` or ``COUNT(DISTINCT …)`` added or dropped;
* ``join`` — another set of tables, another join type (``LEFT JOIN`` for ``JOIN``) or another
  join condition;
* ``predicate`` — a WHERE (or HAVING) conjunct added, dropped or changed (operator, column,
  ``IS [NOT] NULL``, ``AND``/``OR`` structure);
* ``literal`` — a conjunct that differs only in its constant (``'F'`` for ``'female'``);
* ``grouping`` — other GROUP BY keys, or a HAVING clause added or dropped;
* ``ordering`` — other ORDER BY keys or directions;
* ``limit`` — another LIMIT (or one added or dropped);
* ``set_operation`` — UNION / INTERSECT / EXCEPT added, dropped or swapped;
* ``nesting`` — a subquery where the gold has none, or the reverse (e.g. ``WHERE x = (SELECT
  MIN(x) …)`` for ``ORDER BY x LIMIT 1``);
* ``does_not_run`` — the answer does not parse or fails in SQLite (set by the caller's verdict
  or by a parse failure; the structural kinds are still reported when it parses);
* ``no_structural_diff`` — the normal forms agree clause by clause, yet the result differs
  (values formatted differently, ties, type affinity).

Normal form before the diff: identifiers lower-cased, table aliases and qualifiers dropped from
column references, select-list aliases dropped (an ORDER BY / HAVING on an alias reads the
aliased expression), ``COUNT(col)`` read as ``COUNT(*)`` (it differs only on NULLs), join
equalities ordered. A diff is *local* when exactly one decision unit differs (one select item,
one conjunct, one join, one key, the DISTINCT flag or the LIMIT); set operations and nesting are
never local.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

logger = logging.getLogger(__name__)

SQL_KINDS: tuple[str, ...] = (
    "column",
    "aggregate",
    "distinct",
    "join",
    "predicate",
    "literal",
    "grouping",
    "ordering",
    "limit",
    "set_operation",
    "nesting",
    "does_not_run",
    "no_structural_diff",
)
_AGGS = (exp.Count, exp.Sum, exp.Avg, exp.Max, exp.Min)


@dataclass(frozen=True)
class SQLDiff:
    """The kinds of one wrong answer, whether it is one local edit away from the gold, a short
    human-readable detail per difference, and finer sub-kinds (``column:extra``,
    ``join:condition``, ``predicate:dropped``, … — what the profile fit targets)."""

    kinds: tuple[str, ...]
    local: bool
    details: tuple[str, ...] = ()
    subkinds: tuple[str, ...] = ()


def _parse(sql: str) -> exp.Expression | None:
    text = sql.strip().rstrip(";").strip()
    if not text:
        return None
    try:
        trees = [t for t in sqlglot.parse(text, read="sqlite") if t is not None]
    except (SqlglotError, ValueError, RecursionError):
        return None
    return trees[0] if len(trees) == 1 else None


def _normalize(tree: exp.Expression) -> exp.Expression:
    """The normal form described in the module doc (a copy)."""
    tree = tree.copy()
    for sel in list(tree.find_all(exp.Select)):
        aliases = {}
        for item in sel.expressions:
            if isinstance(item, exp.Alias):
                aliases[item.alias.lower()] = item.this
        for key in ("order", "having"):
            clause = sel.args.get(key)
            if clause is None:
                continue
            for col in list(clause.find_all(exp.Column)):
                target = aliases.get(col.name.lower())
                if target is not None and not col.table:
                    col.replace(target.copy())
        sel.set("expressions", [e.this if isinstance(e, exp.Alias) else e for e in sel.expressions])
    for col in list(tree.find_all(exp.Column)):
        col.set("table", None)
        col.set("db", None)
    for table in list(tree.find_all(exp.Table)):
        table.set("alias", None)
    for ident in list(tree.find_all(exp.Identifier)):
        ident.set("this", ident.this.lower())
        ident.set("quoted", False)
    for count in list(tree.find_all(exp.Count)):
        if isinstance(count.this, exp.Column):
            count.set("this", exp.Star())
    for ordered in tree.find_all(exp.Ordered):
        ordered.set("desc", bool(ordered.args.get("desc")))
        ordered.set("nulls_first", None)
    return tree


def _sql(node: exp.Expression | None) -> str:
    return node.sql(dialect="sqlite") if node is not None else ""


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    inner = node.this if isinstance(node, (exp.Where, exp.Having)) else node
    return list(inner.flatten()) if isinstance(inner, exp.And) else [inner]


def _masked(node: exp.Expression) -> str:
    """The text of a conjunct with its constants blanked (to tell a literal-only change)."""
    copy = node.copy()
    for lit in list(copy.find_all(exp.Literal)):
        lit.replace(exp.Literal.string("?"))
    return _sql(copy)


def _strip_agg(node: exp.Expression) -> tuple[str, str]:
    agg = node if isinstance(node, _AGGS) else None
    if agg is None:
        return "", _sql(node)
    inner = agg.this
    distinct = isinstance(inner, exp.Distinct)
    if distinct and inner.expressions:
        inner = inner.expressions[0]
    return type(agg).__name__.upper() + (" DISTINCT" if distinct else ""), _sql(inner)


def _multiset_diff(a: list[str], b: list[str]) -> tuple[Counter[str], Counter[str]]:
    ca, cb = Counter(a), Counter(b)
    return ca - cb, cb - ca


class _Diff:
    """Accumulates (kind, detail, units) while walking two normal forms."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, int]] = []
        self.subkinds: list[str] = []

    def add(self, kind: str, detail: str, units: int = 1, sub: str = "") -> None:
        self.items.append((kind, detail, units))
        self.subkinds.append(f"{kind}:{sub}" if sub else kind)


def _tables(sel: exp.Select) -> tuple[list[str], list[str], list[str]]:
    """Table names, join types and join equalities of one SELECT block (not its subqueries)."""
    names, kinds, conds = [], [], []
    src = sel.args.get("from_") or sel.args.get("from")
    sources = [src.this] if src is not None else []
    for join in sel.args.get("joins") or []:
        sources.append(join.this)
        kinds.append(" ".join(p for p in (join.side, join.kind) if p) or "INNER")
        on = join.args.get("on")
        for part in _conjuncts(on):
            if isinstance(part, exp.EQ):
                conds.append(" = ".join(sorted((_sql(part.this), _sql(part.expression)))))
            elif part is not None:
                conds.append(_sql(part))
    for s in sources:
        names.append(s.name.lower() if isinstance(s, exp.Table) else "(subquery)")
    return names, kinds, conds


def _compare_select(a: exp.Select, b: exp.Select, d: _Diff) -> None:
    """Clause-by-clause differences of two SELECT blocks (a: the answer, b: the gold)."""
    if bool(a.args.get("distinct")) != bool(b.args.get("distinct")):
        added = bool(a.args.get("distinct"))
        d.add(
            "distinct",
            f"SELECT DISTINCT {'added' if added else 'dropped'}",
            sub="added" if added else "dropped",
        )
    pa, pb = [_strip_agg(e) for e in a.expressions], [_strip_agg(e) for e in b.expressions]
    extra, missing = _multiset_diff([f"{f}|{c}" for f, c in pa], [f"{f}|{c}" for f, c in pb])
    xs = [tuple(x.split("|", 1)) for x in extra.elements()]
    ms = [tuple(m.split("|", 1)) for m in missing.elements()]
    for fx, cx in list(xs):  # the same column under another function: an aggregate change
        match = next(
            ((fm, cm) for fm, cm in ms if cm == cx or fm.startswith("COUNT") and fx.startswith("COUNT")), None
        )
        if match is not None:
            xs.remove((fx, cx))
            ms.remove(match)
            only_distinct = fx.replace(" DISTINCT", "") == match[0].replace(" DISTINCT", "")
            d.add(
                "distinct" if only_distinct else "aggregate",
                f"{fx or 'no aggregate'}({cx}) for {match[0] or 'no aggregate'}({match[1]})",
                sub=("added" if "DISTINCT" in fx else "dropped") if only_distinct else "",
            )
    if xs or ms:
        show = lambda items: sorted(f"{f}({c})" if f else c for f, c in items)  # noqa: E731
        sub = "wrong" if xs and ms else "extra" if xs else "missing"
        d.add("column", f"select +{show(xs)} -{show(ms)}", max(len(xs), len(ms)), sub=sub)
    ta, ja, ca = _tables(a)
    tb, jb, cb = _tables(b)
    tx, tm = _multiset_diff(ta, tb)
    if tx or tm:
        d.add(
            "join",
            f"tables +{sorted(tx.elements())} -{sorted(tm.elements())}",
            max(sum(tx.values()), sum(tm.values())),
            sub="tables",
        )
    elif Counter(ja) != Counter(jb):
        d.add("join", f"join types {ja} for {jb}", sub="type")
    elif Counter(ca) != Counter(cb):
        d.add("join", f"join conditions {sorted(ca)} for {sorted(cb)}", sub="condition")
    _compare_where(_conjuncts(a.args.get("where")), _conjuncts(b.args.get("where")), d)
    ga = sorted(_sql(g) for g in (a.args["group"].expressions if a.args.get("group") else []))
    gb = sorted(_sql(g) for g in (b.args["group"].expressions if b.args.get("group") else []))
    if ga != gb:
        d.add("grouping", f"GROUP BY {ga} for {gb}")
    ha, hb = _conjuncts(a.args.get("having")), _conjuncts(b.args.get("having"))
    if ha and hb:  # a changed HAVING condition reads like a changed WHERE one
        _compare_where(ha, hb, d)
    elif ha or hb:
        d.add("grouping", "HAVING added" if ha else "HAVING dropped")
    oa = [_sql(o) for o in (a.args["order"].expressions if a.args.get("order") else [])]
    ob = [_sql(o) for o in (b.args["order"].expressions if b.args.get("order") else [])]
    if oa != ob:
        d.add("ordering", f"ORDER BY {oa} for {ob}")
    la, lb = _sql(a.args.get("limit")), _sql(b.args.get("limit"))
    if la != lb:
        d.add("limit", f"{la or 'no LIMIT'} for {lb or 'no LIMIT'}")


def _compare_where(wa: list[exp.Expression], wb: list[exp.Expression], d: _Diff) -> None:
    extra, missing = _multiset_diff([_sql(c) for c in wa], [_sql(c) for c in wb])
    if not extra and not missing:
        return
    by_text = {_sql(c): c for c in wa + wb}
    xs, ms = list(extra.elements()), list(missing.elements())
    for x in list(xs):
        shape = _masked(by_text[x])
        match = next((m for m in ms if _masked(by_text[m]) == shape), None)
        if match is not None:
            xs.remove(x)
            ms.remove(match)
            d.add("literal", f"{x} for {match}")
    if xs or ms:
        sub = "changed" if xs and ms else "added" if xs else "dropped"
        d.add("predicate", f"WHERE +{xs} -{ms}", max(len(xs), len(ms)), sub=sub)


def _blocks(tree: exp.Expression) -> int:
    return sum(1 for _ in tree.find_all(exp.Select))


def _compare(a: exp.Expression, b: exp.Expression, d: _Diff) -> None:
    sa, sb = isinstance(a, exp.SetOperation), isinstance(b, exp.SetOperation)
    if sa or sb:
        if sa and sb and type(a) is type(b):
            _compare(a.this, b.this, d)
            _compare(a.expression, b.expression, d)
        else:
            name = lambda t: type(t).__name__.upper() if isinstance(t, exp.SetOperation) else "none"  # noqa: E731
            d.add("set_operation", f"{name(a)} for {name(b)}", 2)
        return
    if _blocks(a) != _blocks(b):
        d.add("nesting", f"{_blocks(a) - 1} subquer(ies) for {_blocks(b) - 1}", 2)
    if isinstance(a, exp.Select) and isinstance(b, exp.Select):
        _compare_select(a, b, d)
    elif _sql(a) != _sql(b):
        d.add("nesting", f"{type(a).__name__} for {type(b).__name__}", 2)


def classify_sql(predicted: str, gold: str, *, runs: bool = True) -> SQLDiff:
    """The kinds of `predicted` against `gold` (see the module doc). `runs` False (the caller
    executed it and SQLite refused it) adds ``does_not_run``. An unparsable answer is
    ``does_not_run`` alone, never local; an unparsable gold is a ValueError."""
    gold_tree = _parse(gold)
    if gold_tree is None:
        raise ValueError(f"the gold query does not parse: {gold[:120]!r}")
    tree = _parse(predicted)
    if tree is None:
        return SQLDiff(("does_not_run",), False, ("does not parse",), ("does_not_run",))
    d = _Diff()
    try:
        _compare(_normalize(tree), _normalize(gold_tree), d)
    except (SqlglotError, ValueError, AttributeError, KeyError) as exc:  # an AST shape we do not handle
        logger.warning("SQL diff failed (%s) on %r", exc, predicted[:120])
        d.add("nesting", f"diff failed: {exc}", 2)
    kinds = {k for k, _, _ in d.items}
    subs = set(d.subkinds)
    if not runs:
        kinds.add("does_not_run")
        subs.add("does_not_run")
    if not d.items and runs:
        kinds.add("no_structural_diff")
        subs.add("no_structural_diff")
    units = sum(u for _, _, u in d.items)
    ordered = tuple(k for k in SQL_KINDS if k in kinds)
    details = tuple(f"{k}: {text}" for k, text, _ in d.items)
    return SQLDiff(ordered, units == 1, details, tuple(sorted(subs)))
