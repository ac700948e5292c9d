"""`sqlast.copy_tree` is `Expression.copy()`, faster (issue 35 item 1): the same nodes, args,
parents, comments, metadata and text, and a change to the copy leaves the original alone."""

from __future__ import annotations

import pytest
from sqlglot import exp

from cm_gym.domains.sql import sqlast

QUERIES = [
    "SELECT T1.name, COUNT(*) FROM teams AS T1 JOIN players AS T2 ON T1.team_id = T2.team_id "
    "WHERE T2.age >= 21 AND T1.city IS NOT NULL GROUP BY T1.team_id HAVING COUNT(*) > 3 "
    "ORDER BY 2 DESC LIMIT 5",
    "SELECT a /* note */ FROM t -- trailing\n WHERE CAST(x AS INTEGER) > 3",
    "SELECT DISTINCT name FROM (SELECT name, AVG(price) AS p FROM products GROUP BY name) WHERE p < 10.5",
]


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    if type(a) is not type(b) or (a.comments, a._meta, a._hash, a._type) != (
        b.comments,
        b._meta,
        b._hash,
        b._type,
    ):
        return False
    if a.args.keys() != b.args.keys():
        return False
    for key, x in a.args.items():
        y = b.args[key]
        xs, ys = (x, y) if isinstance(x, list) else ([x], [y])
        if len(xs) != len(ys):
            return False
        for u, v in zip(xs, ys, strict=True):
            if isinstance(u, exp.Expression):
                if not (_same(u, v) and v.parent is b and v.arg_key == u.arg_key and v.index == u.index):
                    return False
            elif u != v:
                return False
    return True


def test_copy_tree_equals_sqlglot_copy() -> None:
    for query in QUERIES:
        tree = sqlast.parse_shared(query)
        mine, theirs = sqlast.copy_tree(tree), tree.copy()
        assert _same(mine, theirs)
        assert sqlast.to_sql(mine) == sqlast.to_sql(theirs) == sqlast.normalize(query)
        assert mine.parent is None and mine is not tree


def test_copy_tree_is_independent_of_the_shared_tree() -> None:
    tree = sqlast.parse_shared(QUERIES[0])
    before = sqlast.to_sql(tree)
    copy = sqlast.copy_tree(tree)
    copy.set("limit", None)
    sqlast.comparisons(copy)[0].replace(exp.LT(this=exp.column("x"), expression=exp.Literal.number(1)))
    copy.meta["line"] = -1
    assert sqlast.to_sql(tree) == before and sqlast.to_sql(copy) != before
    assert sqlast.parse_shared(QUERIES[0]) is tree  # the memoised tree is untouched


def test_edits_and_contrasts_leave_the_shared_tree_unchanged() -> None:
    """`raw_edits` and `infer_contrast` read the memoised tree of a query (`parse_shared`) and
    reuse its stored DFS order: neither may change it, or every later parse of that text would."""
    from cm_gym.domains.sql import contrast, edits

    for query in QUERIES:
        tree = sqlast.parse_shared(query)
        text, order = sqlast.to_sql(tree), [type(n) for n in tree.walk(bfs=False)]
        for edit in edits.raw_edits(query, {"teams.team_id": "INTEGER", "teams.id": "INTEGER"}):
            contrast.infer_contrast(query, edit.text)
            contrast.infer_contrast(edit.text, query)
        assert sqlast.parse_shared(query) is tree and sqlast.to_sql(tree) == text
        assert [type(n) for n in tree.walk(bfs=False)] == order
        assert list(sqlast._dfs(tree)) == list(tree.walk(bfs=False))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM pets WHERE age > 3;",
        "  select count(*) from t  ;; ",
        "",
        ";",
        "SELECT 1; SELECT 2",
        "SELEC name FROM",
        "SELECT (((",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "DROP TABLE pets",
    ],
)
def test_parses_answers_as_parse_does_without_copying(sql: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sqlast.parses` (reply reading asks it of every new reply) is `parse` succeeding, without
    the copy `parse` makes."""
    try:
        sqlast.parse(sql)
        expected = True
    except sqlast.SQLParseError:
        expected = False
    monkeypatch.setattr(sqlast, "copy_tree", lambda tree: pytest.fail("parses copied the tree"))
    monkeypatch.setattr(sqlast, "copy_tracking", lambda tree, track: pytest.fail("parses copied the tree"))
    assert sqlast.parses(sql) is expected


def test_copy_tree_keeps_what_sqlglot_keeps_on_hashed_trees_and_odd_args() -> None:
    """The inlined `set` / `append`: a cached hash survives only on a node without children (as
    sqlglot's `set` drops it), empty and nested lists and non-atomic metadata copy the same."""
    tree = sqlast.parse(QUERIES[0])
    for node in list(tree.walk())[::2]:
        hash(node)
    assert any(n._hash is not None for n in tree.walk())
    tree.set("empty", [])
    tree.set("nested", [[exp.column("z")], "x"])
    tree.find(exp.Column).meta["obj"] = {"nested": [1]}
    inner = tree.args["nested"][0][0]
    mine = sqlast.copy_tree(tree)
    assert inner.parent is mine  # (sqlglot's `append` links a nested list's node to the copy)
    theirs = tree.copy()
    assert inner.parent is theirs and _same(mine, theirs)
    assert [n._hash for n in mine.walk()] == [n._hash for n in theirs.walk()]
    assert any(n._hash is not None for n in mine.walk())
    assert mine.find(exp.Column).meta["obj"] is not tree.find(exp.Column).meta["obj"]


def test_to_sql_reuses_one_generator_per_thread_and_drops_it_after_a_failed_render(monkeypatch) -> None:
    """`sqlast.to_sql` renders with this thread's generator, reset before each use: the text is
    sqlglot's own in every thread, and a rendering that raises leaves no half-set generator."""
    import threading

    first = sqlast.generator()
    assert sqlast.generator() is first and first.unsupported_messages == []
    texts: dict[int, list[str]] = {}

    def render(i: int) -> None:
        texts[i] = [sqlast.to_sql(sqlast.parse_shared(q)) for q in QUERIES * 20]
        texts[i].append(str(sqlast.generator() is not first))

    threads = [threading.Thread(target=render, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = [sqlast.parse_shared(q).sql(dialect="sqlite") for q in QUERIES] * 20 + ["True"]
    assert all(texts[i] == expected for i in range(4))
    monkeypatch.setattr(type(first), "select_sql", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        sqlast.to_sql(sqlast.parse_shared(QUERIES[0]))
    monkeypatch.undo()
    assert sqlast.generator() is not first
    assert sqlast.to_sql(sqlast.parse_shared(QUERIES[0])) == expected[0]
