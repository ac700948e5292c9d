"""Rule-based local edits of a SQL query on its sqlglot AST (never on the string).

Each edit changes exactly one decision unit: one comparison (``>`` ↔ ``>=``, ``<`` ↔ ``<=``,
``=`` ↔ ``!=``), one IS [NOT] NULL, one DISTINCT, one ORDER BY direction, one LIMIT (±1), one
aggregate function, one join-key column, or drops one WHERE conjunct. Units are named
``"<kind>:<index>"`` (e.g. ``"comparison:0"``). The order is deterministic: round-robin over the
kinds, comparisons first, so that the first K = 4 edits cover several kinds of slip. Every edited
query is rendered by `sqlast.to_sql`, the same normal form as drafts, so a⁻ and a⁺ differ in
one place.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from cm_gym.core import boundedjson
from cm_gym.domains.base import Edit
from cm_gym.domains.sql import splice, sqlast

#: the largest stored value the work memo's decoders read (a query's edits are a few KiB)
_MEMO_BYTES = 4 << 20
KINDS = ("comparison", "null", "distinct", "order", "limit", "agg", "join_key", "where")
AGG_PARTNER = {"SUM": "AVG", "AVG": "SUM", "MAX": "MIN", "MIN": "MAX", "COUNT": "SUM"}


@dataclass(frozen=True)
class Change:
    """What one edit did, in structured form (used to name and transfer contrasts)."""

    kind: str  # cmp | null | distinct | order | limit | agg | join_key | where
    frm: str = ""
    to: str = ""
    target: str = ""  # column (or operand) the change applies to
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Canonical contrast key, e.g. "cmp:GT->GTE", "distinct:add", "limit:+1"."""
        if self.kind in ("cmp", "order", "agg", "null", "join_type", "like", "count"):
            return f"{self.kind}:{self.frm}->{self.to}"
        if self.kind == "project":
            return f"project:{self.to}"
        if self.kind == "limit":
            delta = int(self.to) - int(self.frm)
            return f"limit:{delta:+d}"
        if self.kind in ("distinct", "where"):
            return f"{self.kind}:{self.to}"
        return self.kind


@dataclass(frozen=True)
class RawEdit:
    text: str
    unit: str
    change: Change
    description: str


Mutator = Callable[[exp.Expression], tuple[Change, str] | None]


def _variants(
    tree: exp.Expression,
    nodes: Callable[[exp.Expression], list],
    mutate: Callable,
    spans: splice.Rendered | None = None,
) -> Iterator[tuple[int, Change, str, str]]:
    """For each node i, apply `mutate(tree, node)` to a copy; yield results. With `spans` (the
    query rendered with node spans) the edited text is spliced (`splice`); else, or where it
    cannot be, the node is re-found in a copy of the whole tree and the copy rendered."""
    for i, target in enumerate(nodes(tree)):
        if spans is not None and mutate is _toggle_distinct and isinstance(target, exp.Select):
            text = spans.toggle_distinct(target)
            if text is not None:
                change, desc = _select_distinct(target)
                yield i, change, text, desc
                continue
        elif spans is not None:
            made: list[tuple[Change, str]] = []
            text = spans.splice(target, functools.partial(_mutated, mutate, made))
            if text is not None:
                yield i, made[0][0], text, made[0][1]
                continue
        copy, node = sqlast.copy_tracking(tree, target)  # the i-th node of the copy, as nodes(copy)[i]
        if node is None:
            node = nodes(copy)[i]
        out = mutate(copy, node)
        if out is not None:
            change, desc = out
            yield i, change, sqlast.to_sql_owned(copy), desc


def _mutated(mutate: Callable, made: list[tuple[Change, str]], node: exp.Expression) -> exp.Expression | None:
    """`mutate` applied to a detached `node` (held by a parenthesis, so that a mutator that
    replaces the node can): the changed node, its (change, description) appended to `made`."""
    holder = exp.Paren(this=node)
    out = mutate(holder, node)
    if out is None:
        return None
    made.append(out)
    return holder.this


def _flip_cmp(tree: exp.Expression, node: exp.Expression) -> tuple[Change, str]:
    frm = sqlast.CMP_TYPES[type(node)]
    to = sqlast.CMP_FLIP[frm]
    before = sqlast.to_sql(node)
    new = sqlast.CMP_BY_NAME[to](this=node.this, expression=node.expression)
    node.replace(new)
    return Change("cmp", frm, to, sqlast.operand_key(new)), f"{before} → {sqlast.to_sql(new)}"


def _flip_null(tree: exp.Expression, node: exp.Is) -> tuple[Change, str]:
    frm = "IS NOT" if node.args.get("negate") else "IS"
    to = "IS" if frm == "IS NOT" else "IS NOT"
    node.set("negate", to == "IS NOT")
    target = sqlast.column_name(node.this) or sqlast.to_sql(node.this).lower()
    return Change("null", frm, to, target), f"{frm} NULL → {to} NULL on {sqlast.to_sql(node.this)}"


def _distinct_nodes(tree: exp.Expression) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    for sel in sqlast.selects(tree):
        one_row = not sel.args.get("group") and all(
            isinstance(e.unalias(), exp.AggFunc) for e in sel.expressions
        )
        if sel.args.get("distinct") or not one_row:
            out.append(sel)
    for agg in sqlast.aggregates(tree):
        if isinstance(agg, exp.Count) and not isinstance(agg.this, exp.Star) and agg.this is not None:
            out.append(agg)
    return out


_ON_SELECT: Mapping[str, str] = {"on": "select"}
_ON_COUNT: Mapping[str, str] = {"on": "count"}


def _select_distinct(node: exp.Select) -> tuple[Change, str]:
    """What toggling a SELECT's DISTINCT is (the node unchanged)."""
    target = sqlast.column_name(node.expressions[0].unalias()) if node.expressions else ""
    if node.args.get("distinct"):
        return Change("distinct", "DISTINCT", "remove", target, _ON_SELECT), "remove DISTINCT"
    return Change("distinct", "", "add", target, _ON_SELECT), "add DISTINCT"


def _toggle_distinct(tree: exp.Expression, node: exp.Expression) -> tuple[Change, str]:
    if isinstance(node, exp.Select):
        out = _select_distinct(node)
        node.set("distinct", exp.Distinct() if out[0].to == "add" else None)
        return out
    inner = node.this
    if isinstance(inner, exp.Distinct):
        arg = inner.expressions[0]
        node.set("this", arg)
        return Change(
            "distinct", "DISTINCT", "remove", sqlast.column_name(arg), _ON_COUNT
        ), "COUNT(DISTINCT x) → COUNT(x)"
    node.set("this", exp.Distinct(expressions=[inner]))
    return Change("distinct", "", "add", sqlast.column_name(inner), _ON_COUNT), "COUNT(x) → COUNT(DISTINCT x)"


def set_direction(node: exp.Ordered, desc: bool) -> None:
    """Set an ORDER BY key's direction, keeping SQLite's default NULL placement."""
    default_nulls_first = not bool(node.args.get("desc"))
    if bool(node.args.get("nulls_first")) == default_nulls_first:
        node.set("nulls_first", not desc)
    node.set("desc", desc)


def _flip_order(tree: exp.Expression, node: exp.Ordered) -> tuple[Change, str]:
    frm = "DESC" if node.args.get("desc") else "ASC"
    to = "ASC" if frm == "DESC" else "DESC"
    set_direction(node, to == "DESC")
    target = sqlast.column_name(node.this) or sqlast.to_sql(node.this).lower()
    return Change("order", frm, to, target), f"ORDER BY {sqlast.to_sql(node.this)} {frm} → {to}"


def _limit_edits(
    tree: exp.Expression, spans: splice.Rendered | None = None
) -> Iterator[tuple[int, Change, str, str]]:
    for i, limit in enumerate(sqlast.limits(tree)):
        n = int(limit.expression.this)
        for m in (n + 1, n - 1):
            if m < 1:
                continue
            text = _with_arg(
                tree,
                spans,
                limit,
                lambda c, i=i: sqlast.limits(c)[i],
                "expression",
                lambda m=m: sqlast.literal_int(m),
            )
            yield i, Change("limit", str(n), str(m)), text, f"LIMIT {n} → {m}"


def _with_arg(
    tree: exp.Expression,
    spans: splice.Rendered | None,
    node: exp.Expression,
    find: Callable[[exp.Expression], exp.Expression],
    arg: str,
    value: Callable[[], exp.Expression],
) -> str:
    """The text of `tree` with `node`'s argument `arg` set to a new `value()`: spliced, else
    rendered from a whole copy (where `find(copy)` is the node)."""
    text = spans.splice(node, functools.partial(splice.with_arg, arg, value())) if spans else None
    if text is None:
        copy = sqlast.copy_tree(tree)
        find(copy).set(arg, value())
        text = sqlast.to_sql_owned(copy)
    return text


def _agg_nodes(tree: exp.Expression) -> list[exp.Expression]:
    return [
        a
        for a in sqlast.aggregates(tree)
        if not (isinstance(a, exp.Count) and (a.this is None or isinstance(a.this, (exp.Star, exp.Distinct))))
    ]


def swap_agg(node: exp.Expression, to: str) -> exp.Expression:
    """Replace an aggregate call by another function over the same argument."""
    new = sqlast.AGG_BY_NAME[to](this=node.this)
    node.replace(new)
    return new


def _swap_agg(tree: exp.Expression, node: exp.Expression) -> tuple[Change, str]:
    frm = sqlast.AGG_TYPES[type(node)]
    to = AGG_PARTNER[frm]
    target = sqlast.column_name(node.this)
    swap_agg(node, to)
    return Change("agg", frm, to, target), f"{frm}(...) → {to}(...)"


def join_candidates(column: str, table: str, column_types: Mapping[str, str], limit: int = 2) -> list[str]:
    """Other key-like columns of `table` (``*_id`` / ``id`` first) to try as a join key."""
    cols = [k.split(".", 1)[1] for k in column_types if k.split(".", 1)[0] == table]
    keys = [c for c in cols if c != column.lower() and (c.endswith("_id") or c == "id" or c.endswith("id"))]
    return keys[:limit]


def _join_edits(
    tree: exp.Expression, column_types: Mapping[str, str], spans: splice.Rendered | None = None
) -> Iterator[tuple[int, Change, str, str]]:
    eqs = sqlast.join_key_eqs(tree)
    aliases = sqlast.table_aliases(tree) if eqs else {}  # (a walk of the tree: only for join keys)
    for i, eq in enumerate(eqs):
        for side in ("this", "expression"):
            col = eq.args[side]
            table = aliases.get(col.table.lower(), "") if col.table else ""
            for alt in join_candidates(col.name, table, column_types, 2 if side == "this" else 1):
                find = lambda c, i=i, side=side: sqlast.join_key_eqs(c)[i].args[side]  # noqa: E731
                text = _with_arg(tree, spans, col, find, "this", lambda alt=alt: exp.to_identifier(alt))
                change = Change("join_key", col.name.lower(), alt, table)
                yield i, change, text, f"join key {sqlast.to_sql(col)} → {alt}"


def _where_edits(
    tree: exp.Expression, spans: splice.Rendered | None = None
) -> Iterator[tuple[int, Change, str, str]]:
    conjuncts = sqlast.where_conjuncts(tree)
    if len(conjuncts) < 2:
        return
    for i in range(len(conjuncts)):
        dropped: list[str] = []
        text = (
            spans.splice(tree.args["where"], functools.partial(_drop_conjunct, i, dropped)) if spans else None
        )
        if text is None:
            copy = sqlast.copy_tree(tree)
            parts = sqlast.where_conjuncts(copy)
            dropped = [sqlast.to_sql(parts[i])]
            copy.set("where", exp.Where(this=exp.and_(*(p for j, p in enumerate(parts) if j != i))))
            text = sqlast.to_sql_owned(copy)
        yield i, Change("where", dropped[0], "drop", dropped[0]), text, f"drop condition {dropped[0]}"


def _drop_conjunct(i: int, dropped: list[str], where: exp.Expression) -> exp.Expression:
    """A WHERE clause without its `i`-th top-level conjunct (its text appended to `dropped`)."""
    parts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    dropped.append(sqlast.to_sql(parts[i]))
    return exp.Where(this=exp.and_(*(p for j, p in enumerate(parts) if j != i)))


#: more edit kinds for `raw_edits`: ``extra(tree) -> {kind: (index, change, text, description)...}``
ExtraSources = Callable[[exp.Expression], Mapping[str, Iterator[tuple[int, Change, str, str]]]]


def raw_edits(
    action: str, column_types: Mapping[str, str] | None = None, extra: ExtraSources | None = None
) -> list[RawEdit]:
    """All one-unit edits of `action`, round-robin over kinds (comparisons first). `extra` adds
    kinds after the base ones in each round (`edits_local.extended_edits`); without it the list
    is the base grammar's, unchanged.

    The base grammar's list is a pure function of (action, column types), memoised: the
    simulator's revision model asks for the edits of the same draft many times (its edit kinds,
    `contrast.infer_contrast`), and each derivation copies and renders the tree once per edit."""
    if extra is not None:
        return _raw_edits(action, column_types, extra)
    types = tuple(column_types.items()) if column_types else ()  # in order: join candidates follow it
    return list(_base_edits(action, types))


@functools.lru_cache(maxsize=8192)
def _base_edits(action: str, column_types: tuple[tuple[str, str], ...]) -> tuple[RawEdit, ...]:
    """The base grammar's edits, through the persistent work memo (`sql.workmemo`)."""
    from cm_gym.domains.sql import workmemo

    return workmemo.sql_work().cached(
        workmemo.memo_key("edits", action, json.dumps(column_types)),
        lambda: tuple(_raw_edits(action, dict(column_types), None)),
        encode_edits,
        decode_edits,
    )


def _raw_edits(
    action: str, column_types: Mapping[str, str] | None, extra: ExtraSources | None, splicing: bool = True
) -> list[RawEdit]:
    try:  # the base kinds only read `tree` (each edit changes its own copy): no copy needed
        tree = sqlast.parse(action) if extra is not None else sqlast.parse_shared(action)
    except sqlast.SQLParseError:
        return []
    base = sqlast.normalize(action)  # = to_sql(tree), memoised
    spans = (
        splice.rendered_cached(tree, base) if extra is None and splicing else None
    )  # (extra: a private tree)
    more = dict(extra(tree)) if extra is not None else {}
    kinds = (*KINDS, *more)
    groups: dict[str, list[RawEdit]] = {k: [] for k in kinds}
    sources: dict[str, Iterator[tuple[int, Change, str, str]]] = {
        "comparison": _variants(tree, sqlast.comparisons, _flip_cmp, spans),
        "null": _variants(tree, sqlast.null_checks, _flip_null, spans),
        "distinct": _variants(tree, _distinct_nodes, _toggle_distinct, spans),
        "order": _variants(tree, sqlast.ordered_keys, _flip_order, spans),
        "limit": _limit_edits(tree, spans),
        "agg": _variants(tree, _agg_nodes, _swap_agg, spans),
        "join_key": _join_edits(tree, column_types or {}, spans),
        "where": _where_edits(tree, spans),
        **more,
    }
    for kind, source in sources.items():
        for i, change, text, desc in source:
            groups[kind].append(RawEdit(text, f"{kind}:{i}", change, desc))
    out: list[RawEdit] = []
    seen = {base}
    for rnd in range(max((len(g) for g in groups.values()), default=0)):
        for kind in kinds:
            if rnd < len(groups[kind]) and groups[kind][rnd].text not in seen:
                seen.add(groups[kind][rnd].text)
                out.append(groups[kind][rnd])
    return out


def edit_operators(action: str, column_types: Mapping[str, str] | None = None) -> list[Edit]:
    """`raw_edits` as the Domain contract's `Edit` objects."""
    return [Edit(e.text, e.unit, e.description) for e in raw_edits(action, column_types)]


# -- the work memo's encoding of edits and changes (JSON; exact round trip) ---------------
def _change_fields(change: Change | None) -> list[Any] | None:
    if change is None:
        return None
    return [change.kind, change.frm, change.to, change.target, dict(change.extra)]


def _change_of(fields: Any) -> Change | None:
    if fields is None:
        return None
    kind, frm, to, target, extra = fields
    return Change(str(kind), str(frm), str(to), str(target), {str(k): str(v) for k, v in extra.items()})


def encode_change(change: Change | None) -> str:
    """JSON of a `Change` (or null) for the work memo (`sql.workmemo`)."""
    return json.dumps(_change_fields(change))


def decode_change(data: bytes | str) -> Change | None:
    return _change_of(boundedjson.loads(data, max_bytes=_MEMO_BYTES, what="a stored change"))


def encode_edits(edits: tuple[RawEdit, ...]) -> str:
    """JSON of a tuple of `RawEdit` for the work memo."""
    return json.dumps([[e.text, e.unit, _change_fields(e.change), e.description] for e in edits])


def decode_edits(data: bytes | str) -> tuple[RawEdit, ...]:
    rows = boundedjson.loads(data, max_bytes=_MEMO_BYTES, what="stored edits", expect=list)
    out = []
    for text, unit, change, description in rows:
        found = _change_of(change)
        if found is None:
            raise ValueError("an edit without its change")
        out.append(RawEdit(str(text), str(unit), found, str(description)))
    return tuple(out)
