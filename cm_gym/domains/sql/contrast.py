"""What a record's a⁻ → a⁺ changed (by AST), its canonical key, and how to transfer it to a draft.

`infer_contrast` recognises the one-unit edits of `edits.py` (comparison flip, DISTINCT, ORDER BY
direction, LIMIT, aggregate, IS [NOT] NULL, join key, dropped or added WHERE conjunct) by
re-deriving them from a⁻, then the kinds of `edits_local.py` (projected column, join type, LIKE,
value casing, COUNT(*)) when no base kind explains the pair; `apply_contrast` applies the same *kind* of change to another query —
preferring the same column, else the first place where the pattern occurs — whether or not it is
right there. It never looks at a task's reference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from sqlglot import exp

from cm_gym.domains.sql import edits, edits_local, splice, sqlast
from cm_gym.domains.sql.edits import Change


def _join_change(minus: exp.Expression, plus: exp.Expression) -> Change | None:
    """One column of one join-key equality replaced by another column, everything else equal."""
    a, b = sqlast.join_key_eqs(minus), sqlast.join_key_eqs(plus)
    if len(a) != len(b):
        return None
    diffs = [
        (i, side)
        for i, (ea, eb) in enumerate(zip(a, b, strict=True))
        for side in ("this", "expression")
        if sqlast.to_sql(ea.args[side]) != sqlast.to_sql(eb.args[side])
    ]
    if len(diffs) != 1:
        return None
    i, side = diffs[0]
    ca, cb = a[i].args[side], b[i].args[side]
    copy = sqlast.copy_tree(minus)
    sqlast.join_key_eqs(copy)[i].args[side].set("this", cb.this.copy())
    if sqlast.to_sql_owned(copy) != sqlast.to_sql(plus):
        return None
    table = sqlast.table_aliases(minus).get(ca.table.lower(), "") if ca.table else ""
    return Change("join_key", ca.name.lower(), cb.name.lower(), table)


def _added_conjunct(minus: exp.Expression, plus: exp.Expression) -> Change | None:
    a = [sqlast.to_sql(c) for c in sqlast.where_conjuncts(minus)]
    b = [sqlast.to_sql(c) for c in sqlast.where_conjuncts(plus)]
    if len(b) != len(a) + 1:
        return None
    for i, cond in enumerate(b):
        if b[:i] + b[i + 1 :] == a:
            copy = sqlast.copy_tree(minus)
            copy.set("where", None)
            rest = sqlast.copy_tree(plus)
            rest.set("where", None)
            if sqlast.to_sql_owned(copy) == sqlast.to_sql_owned(rest):
                return Change("where", "", "add", cond)
    return None


def _swapped_node(
    minus: exp.Expression,
    plus: exp.Expression,
    nodes: Callable[[exp.Expression], list[exp.Expression]],
    names: Mapping[type[exp.Expression], str],
    kind: str,
) -> Change | None:
    """One comparison / aggregate whose *type* differs (same operands), everything else equal."""
    a, b = nodes(minus), nodes(plus)
    if len(a) != len(b):
        return None
    diffs = [(x, y) for x, y in zip(a, b, strict=True) if type(x) is not type(y)]
    if len(diffs) != 1:
        return None
    x, y = diffs[0]
    if sqlast.to_sql(x.this) != sqlast.to_sql(y.this):
        return None
    copy = sqlast.copy_tree(minus)
    node = nodes(copy)[a.index(x)]
    node.replace(
        type(y)(**{k: v.copy() if isinstance(v, exp.Expression) else v for k, v in node.args.items()})
    )
    if sqlast.to_sql_owned(copy) != sqlast.to_sql(plus):
        return None
    target = sqlast.operand_key(x) if kind == "cmp" else sqlast.column_name(x.this)
    return Change(kind, names[type(x)], names[type(y)], target)


def infer_contrast(a_minus: str, a_plus: str) -> Change | None:
    """The one-unit change that turns `a_minus` into `a_plus`, or None when it is not one."""
    return _infer_cached(a_minus, a_plus)


@functools.lru_cache(maxsize=65536)
def _infer_cached(a_minus: str, a_plus: str) -> Change | None:
    from cm_gym.domains.sql import workmemo  # through the persistent work memo

    return workmemo.sql_work().cached(
        workmemo.memo_key("contrast", a_minus, a_plus),
        lambda: _infer(a_minus, a_plus),
        edits.encode_change,
        edits.decode_change,
    )


def _infer(a_minus: str, a_plus: str) -> Change | None:
    try:  # everything below only reads the two trees (changes are made to copies)
        minus, plus = sqlast.parse_shared(a_minus), sqlast.parse_shared(a_plus)
    except sqlast.SQLParseError:
        return None
    target = sqlast.normalize(a_plus)  # = to_sql(plus), memoised
    if sqlast.normalize(a_minus) == target:
        return None
    quick = _swapped_node(minus, plus, sqlast.comparisons, sqlast.CMP_TYPES, "cmp") or _swapped_node(
        minus, plus, sqlast.aggregates, sqlast.AGG_TYPES, "agg"
    )
    if quick is not None:
        return quick
    for edit in edits.raw_edits(a_minus):
        if edit.text == target:
            return edit.change
    return _join_change(minus, plus) or _added_conjunct(minus, plus) or _local_change(minus, plus, target)


def _local_change(minus: exp.Expression, plus: exp.Expression, target: str) -> Change | None:
    """A change of the kinds of `edits_local` (tried only when no base kind explains the pair,
    so the keys of base-kind contrasts never change)."""
    for source in edits_local.local_sources(minus, {}, None).values():
        for _i, change, text, _desc in source:
            if text == target:
                return change
    a = [n for n in minus.find_all(exp.Literal) if n.is_string]
    b = [n for n in plus.find_all(exp.Literal) if n.is_string]
    diffs = [(x, y) for x, y in zip(a, b, strict=False) if x.this != y.this] if len(a) == len(b) else []
    if len(diffs) == 1 and diffs[0][0].this.lower() == diffs[0][1].this.lower():
        x, y = diffs[0]
        copy = sqlast.copy_tree(minus)
        next(n for n in copy.find_all(exp.Literal) if n.is_string and n.this == x.this).replace(y.copy())
        if sqlast.to_sql_owned(copy) == target:
            column = x.parent.this if isinstance(x.parent, exp.Binary) else None
            return Change("value_case", x.this, y.this, sqlast.column_name(column))
    return None


def contrast_key(a_minus: str, a_plus: str) -> str | None:
    """Canonical key of the change ("cmp:GT->GTE", "distinct:add", ...), None if unrecognised."""
    change = infer_contrast(a_minus, a_plus)
    return change.key if change else None


_STRICT, _INCLUSIVE = frozenset({"GT", "LT"}), frozenset({"GTE", "LTE"})


def edit_kind(a_minus: str, a_plus: str) -> str | None:
    """The site-free kind of a one-unit change: a comparison made inclusive or strict, an
    aggregate swapped, DISTINCT added or removed, ... (None when the change is not one edit)."""
    change = infer_contrast(a_minus, a_plus)
    return change_kind(change) if change is not None else None


def change_kind(change: Change) -> str:
    """The site-free kind of one structured change (`edit_kind` of the pair it turns into)."""
    if change.kind == "cmp":
        if change.frm in _STRICT and change.to in _INCLUSIVE:
            return "cmp:include-boundary"
        if change.frm in _INCLUSIVE and change.to in _STRICT:
            return "cmp:exclude-boundary"
        return change.key
    if change.kind in ("distinct", "where", "null", "order"):
        return f"{change.kind}:{change.to}"
    if change.kind == "limit" or change.kind in edits_local.LOCAL_KINDS:
        return "value_case" if change.kind == "value_case" else change.key
    return change.kind


# -- transfer ------------------------------------------------------------------------------------
def _pick(
    nodes: list[exp.Expression], key_of: Callable[[exp.Expression], str], target: str
) -> exp.Expression | None:
    """The node about the same column as the record, else the first candidate."""
    if not nodes:
        return None
    for node in nodes:
        if target and key_of(node) == target:
            return node
    return nodes[0]


def _sites(tree: exp.Expression, change: Change) -> list[exp.Expression] | None:
    """The nodes `_apply` may change for a cmp / null / order / agg / join_key change (its
    candidates, before any change; a join-key equality once per matching side); None for the
    other kinds. Read only, so `apply_contrast` can ask the shared parse tree first: no site,
    no copy."""
    kind = change.kind
    if kind == "cmp":
        return [n for n in sqlast.comparisons(tree) if sqlast.CMP_TYPES[type(n)] == change.frm]
    if kind == "null":
        want_negate = change.frm == "IS NOT"
        return [n for n in sqlast.null_checks(tree) if bool(n.args.get("negate")) == want_negate]
    if kind == "order":
        return [
            n for n in sqlast.ordered_keys(tree) if ("DESC" if n.args.get("desc") else "ASC") == change.frm
        ]
    if kind == "agg":
        cands = [n for n in sqlast.aggregates(tree) if sqlast.AGG_TYPES[type(n)] == change.frm]
        return [n for n in cands if not isinstance(n.this, (exp.Star, exp.Distinct))]
    if kind == "join_key":
        return [
            eq.args[side]
            for eq in sqlast.join_key_eqs(tree)
            for side in ("this", "expression")
            if eq.args[side].name.lower() == change.frm
        ]
    return None


#: `_site`'s answer for a change made to the whole tree (`_apply` makes it; never spliced)
_WHOLE = object()
#: a site's change: the changed node made from the node (which it may change in place)
NodeChange = Callable[[exp.Expression], exp.Expression]


def _site(tree: exp.Expression, change: Change) -> tuple[exp.Expression, NodeChange] | None | object:
    """The node of `tree` that `change` changes and how, found read only: None when there is no
    site, `_WHOLE` for the kinds `_apply` makes to the whole tree (a SELECT's DISTINCT, WHERE,
    the local kinds)."""
    kind = change.kind
    if kind == "cmp":
        node = _pick(_sites(tree, change) or [], sqlast.operand_key, change.target)
        to = sqlast.CMP_BY_NAME[change.to]
        return None if node is None else (node, lambda n: to(this=n.this, expression=n.expression))
    if kind == "null":
        node = _pick(_sites(tree, change) or [], lambda n: sqlast.column_name(n.this), change.target)
        return (
            None
            if node is None
            else (node, functools.partial(splice.with_arg, "negate", change.frm != "IS NOT"))
        )
    if kind == "order":
        node = _pick(
            _sites(tree, change) or [],
            lambda n: sqlast.column_name(n.this) or sqlast.to_sql(n.this).lower(),
            change.target,
        )
        return None if node is None else (node, functools.partial(_directed, change.to == "DESC"))
    if kind == "limit":
        limits = sqlast.limits(tree)
        n = int(limits[0].expression.this) + int(change.to) - int(change.frm) if limits else 0
        return (
            (limits[0], functools.partial(splice.with_arg, "expression", sqlast.literal_int(n)))
            if n >= 1
            else None
        )
    if kind == "agg":
        node = _pick(_sites(tree, change) or [], lambda n: sqlast.column_name(n.this), change.target)
        agg = sqlast.AGG_BY_NAME[change.to]
        return None if node is None else (node, lambda n: agg(this=n.this))
    if kind == "join_key":
        sites = _sites(tree, change) or []
        return (
            (sites[0], functools.partial(splice.with_arg, "this", exp.to_identifier(change.to)))
            if sites
            else None
        )
    if kind == "distinct" and change.extra.get("on") == "count":
        return _count_distinct_site(tree, change)
    return _WHOLE


def _directed(desc: bool, node: exp.Expression) -> exp.Expression:
    edits.set_direction(node, desc)
    return node


def _apply(tree: exp.Expression, change: Change, column_types: Mapping[str, str]) -> bool:
    site = _site(tree, change)
    if site is None:
        return False
    if site is not _WHOLE:
        node, make = site  # type: ignore[misc]
        new = make(node)
        if new is not node:
            node.replace(new)
        return True
    kind = change.kind
    if kind == "distinct":
        return _apply_distinct(tree, change)
    if kind == "where":
        return _apply_where(tree, change)
    return edits_local.apply_local(tree, change)


def _spliced(spans: splice.Rendered, tree: exp.Expression, change: Change) -> str | None | object:
    """`change` applied to the shared `tree` by splicing its text (`splice`): the new text,
    None when there is no site, `_WHOLE` when it cannot be spliced (then `_apply` on a copy)."""
    site = _site(tree, change)
    if site is None:
        return None
    if site is _WHOLE:
        if change.kind != "distinct":
            return _WHOLE
        sels = sqlast.selects(tree)
        if not sels or bool(sels[0].args.get("distinct")) == (change.to == "add"):
            return None
        text = spans.toggle_distinct(sels[0])
    else:
        text = spans.splice(*site)  # type: ignore[misc]
    return _WHOLE if text is None else text


def _apply_distinct(tree: exp.Expression, change: Change) -> bool:
    """SELECT DISTINCT contrasts transfer to the outer SELECT (COUNT(DISTINCT x) ones: `_site`)."""
    add = change.to == "add"
    sels = sqlast.selects(tree)
    if not sels or bool(sels[0].args.get("distinct")) == add:
        return False
    sels[0].set("distinct", exp.Distinct() if add else None)
    return True


def _count_distinct_site(tree: exp.Expression, change: Change) -> tuple[exp.Expression, NodeChange] | None:
    """COUNT(DISTINCT x) contrasts transfer to a COUNT (the same column first)."""
    add = change.to == "add"
    counts = [
        a
        for a in sqlast.aggregates(tree)
        if isinstance(a, exp.Count) and a.this is not None and not isinstance(a.this, exp.Star)
        and isinstance(a.this, exp.Distinct) != add
    ]  # fmt: skip

    def column(n: exp.Expression) -> str:
        return sqlast.column_name(n.this.expressions[0] if isinstance(n.this, exp.Distinct) else n.this)

    def toggle(n: exp.Expression) -> exp.Expression:
        n.set("this", exp.Distinct(expressions=[n.this]) if add else n.this.expressions[0])
        return n

    node = _pick(counts, column, change.target)
    return None if node is None else (node, toggle)


def _apply_where(tree: exp.Expression, change: Change) -> bool:
    if not isinstance(tree, exp.Select):
        return False
    parts = sqlast.where_conjuncts(tree)
    if change.to == "drop":
        keep = [p for p in parts if sqlast.to_sql(p) != change.target]
        if len(keep) == len(parts):
            return False
        tree.set("where", exp.Where(this=exp.and_(*keep)) if keep else None)
        return True
    if any(sqlast.to_sql(p) == change.target for p in parts):
        return False
    try:
        added = sqlast.parse(f"SELECT 1 WHERE {change.target}").args["where"].this
    except (sqlast.SQLParseError, KeyError, AttributeError):
        return False
    tree.set("where", exp.Where(this=exp.and_(*parts, added)))
    return True


def apply_contrast(
    draft: str,
    a_minus: str,
    a_plus: str,
    column_types: Mapping[str, str] | None = None,
    splicing: bool = True,
) -> str | None:
    """Apply the record's change to `draft`; None when it is unrecognised or does not match.
    The changed text is spliced where it can be (`splice`; ``splicing=False``: never, the
    whole changed copy is rendered: what tests compare with)."""
    change = infer_contrast(a_minus, a_plus)
    if change is None:
        return None
    try:
        shared = sqlast.parse_shared(draft)
    except sqlast.SQLParseError:
        return None
    if _sites(shared, change) == []:  # no site: `_apply` would change nothing (no copy needed)
        return None
    before = sqlast.normalize(draft)  # the text of `tree` as parsed (memoised)
    spans = splice.rendered_cached(shared, before) if splicing else None
    if spans is not None:
        text = _spliced(spans, shared, change)
        if text is not _WHOLE:
            return text if text is not None and text != before else None  # type: ignore[return-value]
    tree = sqlast.copy_tree(shared)  # = sqlast.parse(draft)
    if not _apply(tree, change, column_types or {}):
        return None
    after = sqlast.to_sql_owned(tree)
    return after if after != before else None
