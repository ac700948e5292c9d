"""One-unit edits of a query rendered by splicing text instead of rendering the whole edited copy.

An edit (`edits.py`) changes one node of a query: a comparison, an IS [NOT] NULL, a COUNT's or a
subquery's DISTINCT, an ORDER BY key, a LIMIT, an aggregate, a join-key column, the WHERE
clause. The edited query's text used to be made by copying the whole tree, changing the node in
the copy and rendering the whole copy with sqlglot (`sqlast.to_sql_owned`): a copy and a render
of the query per edit, about a tenth of a cold SQL-v0 process's CPU (issue 35). Here the query
is rendered once, with the span of every node's text in it (`rendered`), and an edit's text is
that text with the node's span replaced by the rendering of the changed node alone
(`Rendered.splice`): a copy and a render of a few nodes.

Why the text is the same. sqlglot renders a tree by concatenating what each node's handler makes
of its children (`Generator.sql` on each child). `rendered` renders a copy of the tree with a
generator that wraps each node's output in private-use marker characters, then strips them and
keeps where each node's text sits; the result is used only when the stripped text is exactly the
query's normal form (a handler that looks at a child's text, renders a child twice or drops it
makes the two differ, or leaves that node without a span) and when the query holds no marker
character and none of the constructs sqlglot's SQLite generator rewrites as it renders (WITH,
QUALIFY, DISTINCT ON, semi and anti joins). `splice` renders a detached copy of the node first
(once per node of a rendering: `Rendered.context_free`) and goes on only when that text is the
node's span: its handler does not read the node's surroundings. Otherwise it answers None and the caller renders the whole edited copy as before.
`tests/domains/sql/test_sql_splice.py` pins that every edit's text (base and extended grammar)
and every transfer of a record's change is the whole-copy rendering's, on SQL-v0's generated tasks
and their one-edit drafts, on Spider's gold queries and on the published predictions of every
system in the shared data (11,844 edits of 5,136 queries).

Measured against the whole-copy path on Spider's 642 gold queries, alternating in one run: a
query's edits 1.9-2.0x faster, a transfer 2.7-3.6x; SQL-v0's cold decision loop 4.4% fewer
instructions (`bench/bench_env_instructions.py --cold`; its queries are small, so a rendering with
spans costs about what one whole edit did: the gain is the edits beyond the first).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from cm_gym.domains.sql import sqlast

logger = logging.getLogger(__name__)
_OPEN, _CLOSE, _FIRST_INDEX = "\ue000", "\ue001", 0xE100
_MAX_NODES = 0xF8FF - _FIRST_INDEX  # node indexes are one private-use character each
_MARK = re.compile("\ue000([\ue100-\uf8ff])|\ue001")
_PRIVATE = re.compile("[\ue000-\uf8ff]")
#: what sqlglot's SQLite generator rewrites while rendering (moves or replaces nodes)
_REWRITTEN = (exp.With, exp.Qualify)
_EXPR: type = getattr(exp, "Expr", exp.Expression)  # sqlglot's node class (``Expr`` from 28 on)


@dataclass
class Rendered:
    """A query's text as the whole-tree rendering makes it before its final strip (`raw`), the
    span of each node's text in it (by the node's position in the shared tree's DFS order), and
    the generator that renders single nodes."""

    raw: str
    spans: dict[int, tuple[int, int]]
    index: dict[int, int]  # id(node of the shared tree) -> its DFS position
    tree: exp.Expression  # the shared tree, kept alive: `index` is by identity
    #: DFS position -> whether that node's text is its own (`context_free`), as checked
    free: dict[int, bool] = field(default_factory=dict)

    def span(self, node: exp.Expression) -> tuple[int, int] | None:
        """Where `node` (a node of the shared tree) was rendered; None when it has no span."""
        i = self.index.get(id(node))
        return self.spans.get(i) if i is not None else None  # (index: the marked nodes only)

    @staticmethod
    def render(node: exp.Expression) -> str:
        """`node`'s text as its parent's handler would ask for it (`Generator.sql`), by this
        thread's generator, set back to a new one's state first (`sqlast.generator`)."""
        generator = sqlast.generator()
        try:
            return generator.sql(node)
        except BaseException:
            sqlast.drop_generator()  # (a render cut short may leave an option switched)
            raise

    def splice(
        self, node: exp.Expression, change: Callable[[exp.Expression], exp.Expression | None]
    ) -> str | None:
        """The query's text with `node` replaced by what `change` makes of a detached copy of it
        (the changed node, or None for no edit: then None); None also when the span cannot be
        trusted (module doc): the caller renders the whole edited copy."""
        span = self.span(node)
        if span is None:
            return None
        start, end = span
        if not self.context_free(node, span):
            return None  # the node's text depends on its surroundings
        changed = change(sqlast.copy_tree(node))
        if changed is None:
            return None
        changed.parent = None  # (a holder the change used is dropped)
        return (self.raw[:start] + self.render(changed) + self.raw[end:]).strip()

    def context_free(self, node: exp.Expression, span: tuple[int, int]) -> bool:
        """Whether a detached copy of `node` renders to its span (its handler reads nothing
        around it); checked once per node of the shared tree, which never changes."""
        i = self.index[id(node)]
        free = self.free.get(i)
        if free is None:
            free = self.free[i] = self.render(sqlast.copy_tree(node)) == self.raw[span[0] : span[1]]
        return free

    def toggle_distinct(self, select: exp.Select) -> str | None:
        """The query's text with DISTINCT added to or removed from `select` (a SELECT of the
        shared tree, the root included), or None (module doc). sqlglot renders a SELECT as
        ``SELECT`` + its hint + ``" " + DISTINCT`` + the rest: with neither hint nor comments,
        the text of a plain DISTINCT (`distinct_text`) goes in or out right after ``SELECT``."""
        distinct = select.args.get("distinct")
        if select.args.get("hint") is not None or select.comments:
            return None
        start, end = (0, len(self.raw)) if select is self.tree else self.span(select) or (-1, -1)
        at = start + len("SELECT")
        if start < 0 or self.raw[start:at] != "SELECT":
            return None
        word = " " + distinct_text()
        if distinct is None:
            return (self.raw[:at] + word + self.raw[at:]).strip()
        if distinct.args.get("on") is not None or distinct.expressions or distinct.comments:
            return None
        if self.raw[at : at + len(word)] != word:
            return None
        return (self.raw[:at] + self.raw[at + len(word) :]).strip()


def with_arg(arg: str, value: object, node: exp.Expression) -> exp.Expression:
    """`node` with its argument `arg` set to `value`: a change for `Rendered.splice` (with
    `functools.partial`) that the whole-copy path applies to its node the same way."""
    node.set(arg, value)
    return node


@functools.lru_cache(maxsize=1)
def distinct_text() -> str:
    """What the generator makes of a plain ``exp.Distinct()`` ("DISTINCT")."""
    return _plain_generator().sql(exp.Distinct())


def rendered_cached(tree: exp.Expression, normal: str) -> Rendered | None:
    """`rendered`, kept per shared tree (a draft's edits and the records applied to it splice
    the same rendering)."""
    entry = _RENDERED.get(id(tree))
    if entry is not None and entry[0] is tree:
        return entry[1]
    if len(_RENDERED) >= _RENDERED_SIZE:
        _RENDERED.clear()
    out = rendered(tree, normal)
    _RENDERED[id(tree)] = (tree, out)
    return out


#: id(shared tree) -> (the tree, kept alive so that its id is not reused; its `rendered`)
_RENDERED: dict[int, tuple[exp.Expression, Rendered | None]] = {}
_RENDERED_SIZE = 1024


def rendered(tree: exp.Expression, normal: str) -> Rendered | None:
    """`tree` (a shared parse tree, read only) rendered with node spans, or None when splicing
    cannot be trusted for it (module doc). `normal` is its normal form (`sqlast.normalize`)."""
    nodes = sqlast.dfs(tree)
    if len(nodes) > _MAX_NODES or _PRIVATE.search(normal) or _rewritten(nodes):
        return None
    # the nodes an edit may change, but the root (never spliced), by DFS position
    wanted = {id(n): i for i, n in enumerate(nodes) if i and type(n) in _TARGETS}
    copy, copies = sqlast.copy_marking(tree, wanted)
    if len(copies) != len(wanted):
        return None
    generator = _marking_generator()
    if generator is None:
        return None
    _MARKS.current = {id(c): i for i, c in copies.items()}
    try:
        marked = generator.sql(generator.preprocess(copy))  # type: ignore[attr-defined]
    finally:
        _MARKS.current = {}
    raw, spans = _unmark(marked)
    if raw is None or raw.strip() != normal:
        return None
    return Rendered(raw, spans, wanted, tree)


def _rewritten(nodes: tuple[exp.Expression, ...]) -> bool:
    """Whether the tree holds a construct the SQLite generator rewrites as it renders."""
    types = set(map(type, nodes))
    if any(issubclass(t, _REWRITTEN) for t in types):
        return True
    for node in nodes:
        if type(node) is exp.Distinct and node.args.get("on") is not None:
            return True
        if type(node) is exp.Join and str(node.args.get("kind") or "").upper() in ("SEMI", "ANTI"):
            return True
    return False


def _unmark(marked: str) -> tuple[str | None, dict[int, tuple[int, int]]]:
    """The text without markers and each marked node's span in it; (None, {}) when the markers
    do not nest. A node rendered more than once gets no span."""
    parts: list[str] = []
    spans: dict[int, tuple[int, int]] = {}
    twice: set[int] = set()
    stack: list[tuple[int, int]] = []
    length = last = 0
    for m in _MARK.finditer(marked):
        parts.append(marked[last : m.start()])
        length += m.start() - last
        last = m.end()
        if m.group(1) is not None:
            stack.append((ord(m.group(1)) - _FIRST_INDEX, length))
        elif not stack:
            return None, {}
        else:
            i, start = stack.pop()
            if i in spans:
                twice.add(i)
            spans[i] = (start, length)
    if stack:
        return None, {}
    parts.append(marked[last:])
    for i in twice:
        del spans[i]
    return "".join(parts), spans


#: the node classes an edit changes (`edits.py`, `contrast.py`): only these are marked
_TARGETS: frozenset[type] = frozenset(
    {*sqlast.CMP_TYPES, *sqlast.AGG_TYPES, exp.Is, exp.Select, exp.Ordered, exp.Limit, exp.Column, exp.Where}
)


#: the marks of the rendering under way in this thread (id of a copied node -> its DFS position)
_MARKS = threading.local()


def _marked(handler: Callable[..., str]) -> Callable[..., str]:
    """`handler` putting the text of a node this thread's rendering marks between markers."""

    def wrapped(generator: object, expression: exp.Expression) -> str:
        text = handler(generator, expression)
        i = getattr(_MARKS, "current", {}).get(id(expression))
        return text if i is None else f"{_OPEN}{chr(_FIRST_INDEX + i)}{text}{_CLOSE}"

    return wrapped


def _fallback(generator: object, expression: exp.Expression) -> str:
    """What `Generator.sql` does with a function that has no handler of its own."""
    return generator.function_fallback_sql(expression)  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1)
def _marking_dispatch() -> dict[type, Callable[..., str]]:
    """The SQLite generator's handlers, those of `_TARGETS` wrapped by `_marked`."""
    dispatch = dict(_plain_generator()._dispatch)  # type: ignore[attr-defined]
    for cls in _TARGETS:
        handler = dispatch.get(cls)
        if handler is not None or issubclass(cls, exp.Func):  # (else sqlglot refuses such a node)
            dispatch[cls] = _marked(handler or _fallback)
    return dispatch


def _marking_generator() -> object | None:
    """A SQLite generator with the marking handlers; None where sqlglot's generator does not
    let them in (a build of sqlglot whose generator keeps no handler table on the instance):
    then nothing is spliced."""
    generator = _plain_generator()
    try:
        if not isinstance(generator._dispatch, dict):  # type: ignore[attr-defined]
            raise TypeError("no handler table")
        generator._dispatch = _marking_dispatch()  # type: ignore[attr-defined]
    except (AttributeError, TypeError) as exc:
        _warn_once(exc)
        return None
    return generator


_warned: list[bool] = []


def _warn_once(exc: Exception) -> None:
    if not _warned:
        _warned.append(True)
        logger.info("SQL edits are rendered whole: this sqlglot's generator cannot mark spans (%s)", exc)


def _plain_generator() -> object:
    return sqlast.dialect().generator()
