"""sqlglot helpers shared by the SQL edit operators, error model, contrasts and features.

Every SQL text this domain *produces* (drafts with slips, edits, revised drafts, generated gold
queries) goes through `normalize`, so two queries that differ in one decision unit differ in one
place of their text. Parsing is in the SQLite dialect; ``x IS NOT NULL`` is kept as such (sqlglot
would otherwise print ``NOT x IS NULL``) and ORDER BY keys always carry an explicit direction.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from copy import deepcopy
from typing import TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.generator import Generator
from sqlglot.helper import name_sequence

from cm_gym.core import boundedjson

DIALECT = "sqlite"
#: the class sqlglot's own copy tests child values against (``Expr`` from sqlglot 28 on)
_EXPR: type = getattr(exp, "Expr", exp.Expression)

#: comparison node types and their names (used in units, contrast keys and error operators)
CMP_TYPES: dict[type[exp.Expression], str] = {
    exp.GT: "GT",
    exp.GTE: "GTE",
    exp.LT: "LT",
    exp.LTE: "LTE",
    exp.EQ: "EQ",
    exp.NEQ: "NEQ",
}
CMP_BY_NAME: dict[str, type[exp.Expression]] = {v: k for k, v in CMP_TYPES.items()}
CMP_SYMBOL = {"GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "EQ": "=", "NEQ": "!="}
#: the boundary flip of each comparison (one decision unit)
CMP_FLIP = {"GT": "GTE", "GTE": "GT", "LT": "LTE", "LTE": "LT", "EQ": "NEQ", "NEQ": "EQ"}

AGG_TYPES: dict[type[exp.Expression], str] = {
    exp.Count: "COUNT",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
    exp.Max: "MAX",
    exp.Min: "MIN",
}
AGG_BY_NAME: dict[str, type[exp.Expression]] = {v: k for k, v in AGG_TYPES.items()}


class SQLParseError(ValueError):
    """The text is not exactly one SQL statement sqlglot can parse."""


def parse(sql: str) -> exp.Expression:
    """Parse exactly one statement (SQLite dialect) into a fresh, canonicalised AST."""
    return copy_tree(_parse_cached(sql.strip().rstrip(";").strip()))


def parses(sql: str) -> bool:
    """Whether `sql` is exactly one statement sqlglot parses: `parse` without its copy (the
    memoised tree is not even looked at), for callers that only ask (reply reading)."""
    try:
        _parse_cached(sql.strip().rstrip(";").strip())
    except SQLParseError:
        return False
    return True


_ATOMS = frozenset({str, int, float, bool, type(None)})
#: the node fields `copy_tree` mirrors from sqlglot's `__deepcopy__` (sqlglot 30)
_MIRRORED_COPY = all(hasattr(exp.Column(), f) for f in ("comments", "_type", "_meta", "_hash", "args"))
E = TypeVar("E", bound=exp.Expression)


def copy_tree(tree: E) -> E:
    """``tree.copy()``, about twice as fast: sqlglot's own `Expression.__deepcopy__` walk, step
    for step, except that a node's metadata (token positions: a dict of ints) and comments (a
    list of strings) are copied as the new dict / list they are, not through `copy.deepcopy`
    (which gives the same for atoms), and that the `set` / `append` linking each new child to its
    parent are inlined (the same parent, arg key, position and dropped hashes; 18% less on a
    48-node query). Anything else — data types, other metadata, a list nested in a list — is
    copied as sqlglot does. A sqlglot whose nodes lack those fields gets its own copy."""
    return copy_tracking(tree, None)[0]


def copy_tracking(tree: E, track: exp.Expression | None) -> tuple[E, exp.Expression | None]:
    """`copy_tree`, and the copy of `track` (a node of `tree`) found on the way, so that a caller
    about to change that node need not walk the copy to find it again; None when `track` is not
    in `tree` (or sqlglot's own copy was used)."""
    if track is None:
        return copy_marking(tree, None)[0], None
    root, copies = copy_marking(tree, {id(track): 0})
    return root, copies[0] if copies else None


def copy_marking(tree: E, wanted: dict[int, int] | None) -> tuple[E, dict[int, exp.Expression]]:
    """`copy_tree`, and the copies of the nodes `wanted` names (id of a node of `tree` -> a key
    of the caller's), by key; an empty dict when sqlglot's own copy was used."""
    if not _MIRRORED_COPY:
        return tree.copy(), {}
    root = tree.__class__()
    found: dict[int, exp.Expression] = {}
    stack: list[tuple[exp.Expression, exp.Expression]] = [(tree, root)]
    atoms, expr = _ATOMS, _EXPR
    while stack:
        node, copy = stack.pop()
        if wanted is not None:
            key = wanted.get(id(node))
            if key is not None:
                found[key] = copy
        comments = node.comments
        if comments is not None:
            copy.comments = list(comments) if atoms.issuperset(map(type, comments)) else deepcopy(comments)
        if node._type is not None:
            copy._type = deepcopy(node._type)
        meta = node._meta
        if meta is not None:
            copy._meta = (
                dict(meta)
                if atoms.issuperset(map(type, meta)) and atoms.issuperset(map(type, meta.values()))
                else deepcopy(meta)
            )
        # sqlglot's `set` / `append` on a new node, inlined: the same parent links and positions,
        # and the cached hash kept only where they would not drop it (no node or item under it)
        args = copy.args
        for k, vs in node.args.items():
            if isinstance(vs, expr):
                child = vs.__class__()
                child.parent, child.arg_key = copy, k
                args[k] = child
                stack.append((vs, child))
            elif type(vs) is not list:
                args[k] = vs
            elif any(type(v) is list for v in vs):  # (a nested list: sqlglot's own way)
                args[k] = []
                for v in vs:
                    if isinstance(v, expr):
                        stack.append((v, v.__class__()))
                        v = stack[-1][-1]
                    copy.append(k, v)
            else:
                items = args[k] = []
                for i, v in enumerate(vs):
                    if isinstance(v, expr):
                        child = v.__class__()
                        child.parent, child.arg_key, child.index = copy, k, i
                        stack.append((v, child))
                        v = child
                    items.append(v)
        if node._hash is not None and not any(
            isinstance(vs, expr) or (type(vs) is list and vs) for vs in node.args.values()
        ):
            copy._hash = node._hash
    return root, found


def parse_shared(sql: str) -> exp.Expression:
    """`parse` without the copy: the memoised tree itself, shared by every caller, which must
    only read it (walk it, render it with `to_sql`, `.copy()` it before any change). For the hot
    read-only paths (deriving a query's edits, recognising a contrast). Its DFS node order is
    computed once and reused by the node enumerations below (it never changes)."""
    tree = _parse_cached(sql.strip().rstrip(";").strip())
    entry = _SHARED_DFS.get(id(tree))
    if entry is None or entry[0] is not tree:
        if len(_SHARED_DFS) >= _SHARED_DFS_SIZE:
            _SHARED_DFS.clear()
        _SHARED_DFS[id(tree)] = (tree, tuple(tree.walk(bfs=False)))
    return tree


#: id → (shared tree, its DFS pre-order): the tree is kept alive here, so its id is not reused
_SHARED_DFS: dict[int, tuple[exp.Expression, tuple[exp.Expression, ...]]] = {}
_SHARED_DFS_SIZE = 8192


@functools.lru_cache(maxsize=4096)
def _parse_cached(sql: str) -> exp.Expression:
    if not sql:
        raise SQLParseError("empty query")
    try:
        trees = [t for t in sqlglot.parse(sql, read=DIALECT) if t is not None]
    except (SqlglotError, ValueError, RecursionError) as err:
        raise SQLParseError(f"cannot parse SQL: {str(err)[:200]}") from err
    if len(trees) != 1:
        raise SQLParseError(f"expected one SQL statement, found {len(trees)}")
    return canonicalize(trees[0])


def canonicalize(tree: exp.Expression) -> exp.Expression:
    """Rewrite NOT (x IS NULL) as x IS NOT NULL and make ORDER BY directions explicit. One
    breadth-first walk finds both kinds of node (what two `find_all` walks found, in their
    order: a rewrite keeps the nodes below the NOT, so no ORDER BY key is lost or added)."""
    nots: list[exp.Expression] = []
    ordered: list[exp.Expression] = []
    for node in tree.walk(bfs=True):
        if isinstance(node, exp.Not):
            nots.append(node)
        elif isinstance(node, exp.Ordered):
            ordered.append(node)
    for node in nots:
        inner = node.this
        if isinstance(inner, exp.Is) and not inner.args.get("negate"):
            node.replace(exp.Is(this=inner.this, expression=inner.expression, negate=True))
    for key in ordered:
        key.set("desc", bool(key.args.get("desc")))
    return tree


def to_sql(tree: exp.Expression) -> str:
    """Render an AST as one-line SQLite text: ``tree.sql(dialect=DIALECT)``, the same text, with
    sqlglot's copy of the tree (the generator may rewrite what it renders) made by `copy_tree`
    and one dialect object and generator: 50 us less on a whole query, where sqlglot's own copy is
    half the cost, and 14 us less on the small nodes that edit descriptions render."""
    return _generate(copy_tree(tree))


def to_sql_owned(tree: exp.Expression) -> str:
    """`to_sql` of a root tree the caller owns and drops afterwards (an edited copy): sqlglot's
    generator then works on it in place instead of deep-copying it first (the same text; the
    tree may be changed by the generator's rewrites, so it must not be used again)."""
    return _generate(tree)


def _generate(tree: exp.Expression) -> str:
    """``Dialect.generate(tree, copy=False)`` by this thread's generator (`generator`)."""
    gen = generator()
    try:
        return gen.generate(tree, copy=False)
    except BaseException:
        drop_generator()  # (a rendering cut short may leave an option switched)
        raise


def generator() -> Generator:
    """This thread's SQLite generator, set back to a new one's state: what a rendering changes on
    it (the messages about unsupported syntax, the counter of generated names) is reset. sqlglot
    builds a generator per rendering (2.5 us); a generator is not shared between threads. A caller
    whose rendering raises must drop it (``_LOCAL.generator = None``, `_generate` does)."""
    gen = getattr(_LOCAL, "generator", None)
    if gen is None:
        gen = _LOCAL.generator = _dialect().generator()
    gen.unsupported_messages = []
    gen._next_name = name_sequence("_t")
    return gen


def drop_generator() -> None:
    """Forget this thread's generator (`generator`): after a rendering with it was cut short."""
    _LOCAL.generator = None


_LOCAL = threading.local()


def dialect() -> Dialect:
    """The SQLite dialect object every rendering here uses (one per process)."""
    return _dialect()


@functools.lru_cache(maxsize=1)
def _dialect() -> Dialect:
    """The SQLite dialect (`Dialect.get_or_raise` builds a new one per call from its name)."""
    return Dialect.get_or_raise(DIALECT)


def normalize(sql: str) -> str:
    """Canonical one-line SQLite text of `sql` (raises SQLParseError when it does not parse).
    Memoised: a pure function of the text, asked for the same drafts and replies again and again."""
    return _normalized(sql)


@functools.lru_cache(maxsize=16384)
def _normalized(sql: str) -> str:
    from cm_gym.domains.sql import workmemo  # through the persistent work memo

    ok, text = workmemo.sql_work().cached(
        workmemo.memo_key("normalize", sql), lambda: _normalize_or_error(sql), json.dumps, _pair
    )
    if not ok:
        raise SQLParseError(text)
    return text


def _normalize_or_error(sql: str) -> tuple[bool, str]:
    try:
        return True, to_sql_owned(parse(sql))
    except SQLParseError as exc:
        return False, str(exc)


def _pair(data: bytes | str) -> tuple[bool, str]:
    ok, text = boundedjson.loads(data, max_bytes=1 << 20, what="a stored normal form", expect=list)
    if not isinstance(ok, bool) or not isinstance(text, str):
        raise ValueError("not a normal form")
    return ok, text


def try_normalize(sql: str) -> str:
    """`normalize`, or the stripped input when sqlglot cannot parse it."""
    try:
        return normalize(sql)
    except SQLParseError:
        return sql.strip()


def pretty(sql: str) -> str:
    """Multi-line rendering, one clause or key per line (the query's decision units)."""
    return parse(sql).sql(dialect=DIALECT, pretty=True)


# -- node enumeration (deterministic DFS pre-order, the order of units) ------------------------
def dfs(tree: exp.Expression) -> tuple[exp.Expression, ...]:
    """`tree`'s nodes in DFS pre-order (a shared tree's stored order; `tree.walk` otherwise)."""
    entry = _SHARED_DFS.get(id(tree))
    if entry is not None and entry[0] is tree:
        return entry[1]
    return tuple(tree.walk(bfs=False))


def _dfs(tree: exp.Expression) -> Iterator[exp.Expression]:
    entry = _SHARED_DFS.get(id(tree))
    if entry is not None and entry[0] is tree:  # a shared (never changed) tree: its stored order
        return iter(entry[1])
    return tree.walk(bfs=False)


def is_column_pair(node: exp.Expression) -> bool:
    """A comparison of two columns (a join key), not a filter against a value."""
    return isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Column)


def comparisons(tree: exp.Expression) -> list[exp.Expression]:
    """Filter comparisons (>, >=, <, <=, =, !=) that are not column = column join keys."""
    return [n for n in _dfs(tree) if type(n) in CMP_TYPES and not is_column_pair(n)]


def join_key_eqs(tree: exp.Expression) -> list[exp.EQ]:
    """column = column equalities inside JOIN ... ON clauses."""
    out: list[exp.EQ] = []
    for join in (n for n in _dfs(tree) if isinstance(n, exp.Join)):
        on = join.args.get("on")
        if on is None:
            continue
        out.extend(n for n in on.walk(bfs=False) if isinstance(n, exp.EQ) and is_column_pair(n))
    return out


def selects(tree: exp.Expression) -> list[exp.Select]:
    """All SELECT nodes, outermost first."""
    return [n for n in _dfs(tree) if isinstance(n, exp.Select)]


def aggregates(tree: exp.Expression) -> list[exp.Expression]:
    """COUNT / SUM / AVG / MAX / MIN calls."""
    return [n for n in _dfs(tree) if type(n) in AGG_TYPES]


def ordered_keys(tree: exp.Expression) -> list[exp.Ordered]:
    """ORDER BY keys of every query level."""
    return [n for n in _dfs(tree) if isinstance(n, exp.Ordered)]


def limits(tree: exp.Expression) -> list[exp.Limit]:
    """LIMIT clauses with an integer literal."""
    out = []
    for node in _dfs(tree):
        if isinstance(node, exp.Limit):
            lit = node.args.get("expression")
            if isinstance(lit, exp.Literal) and not lit.is_string and lit.this.isdigit():
                out.append(node)
    return out


def null_checks(tree: exp.Expression) -> list[exp.Is]:
    """``x IS NULL`` / ``x IS NOT NULL`` predicates."""
    return [n for n in _dfs(tree) if isinstance(n, exp.Is) and isinstance(n.expression, exp.Null)]


def where_conjuncts(tree: exp.Expression) -> list[exp.Expression]:
    """The top-level AND-ed conjuncts of the outermost WHERE clause."""
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None:
        return []
    return list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]


def column_name(node: exp.Expression | None) -> str:
    """Lower-case column name of a Column node ('' for anything else)."""
    return node.name.lower() if isinstance(node, exp.Column) else ""


def operand_key(node: exp.Expression) -> str:
    """What a comparison constrains: the column name, else the left operand's text (lower)."""
    name = column_name(node.this) or column_name(node.expression)
    return name or to_sql(node.this).lower()


def has_top_level_order(tree: exp.Expression) -> bool:
    """True when the outermost query sorts its result (then row order matters)."""
    return tree.args.get("order") is not None


def table_aliases(tree: exp.Expression) -> dict[str, str]:
    """alias (or table name) → table name, lower-case, for every table in the query."""
    out: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        out[name] = name
        if table.alias:
            out[table.alias.lower()] = name
    return out


def literal_int(value: int) -> exp.Literal:
    return exp.Literal.number(value)
