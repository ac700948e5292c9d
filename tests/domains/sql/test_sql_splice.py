"""Spliced edit texts (`cm_gym.domains.sql.splice`) are the whole-copy renderings, byte for byte:
every edit of a query (`edits._raw_edits`) and every transfer of a record's change to a draft
(`contrast.apply_contrast`) with splicing equals the same call with ``splicing=False`` (copy the
whole tree, change it, render it all: the code before splicing), on SQL-v0's generated tasks and
their one-edit drafts, on Spider's gold queries and on published predictions; and where splicing
cannot be trusted, nothing is spliced."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cm_gym.domains.sql import contrast, edits, splice, sqlast
from cm_gym.domains.sql.edits_local import local_sources
from cm_gym.domains.sql.generated import load_tasks

TRICKY = [
    "SELECT a /* why */ FROM t WHERE x > 1 AND y IS NOT NULL ORDER BY a DESC LIMIT 3",
    "WITH c AS (SELECT a FROM t WHERE a > 2) SELECT COUNT(DISTINCT a) FROM c WHERE a < 9 LIMIT 4",
    "SELECT name FROM t WHERE note = 'x\ue000\ue101y\ue001' AND n >= 2 ORDER BY name ASC",
    "SELECT DISTINCT a FROM (SELECT DISTINCT a, MAX(b) AS m FROM t GROUP BY a HAVING MAX(b) > 1) "
    "WHERE m <= 5 AND a != 'q' AND (b > 1 OR c < 2) ORDER BY a DESC LIMIT 10",
    "SELECT T1.n FROM a AS T1 JOIN b AS T2 ON T1.id = T2.a_id WHERE T2.v > 3 "
    "UNION SELECT n FROM c WHERE n IS NULL",
    "SELECT COUNT(*), SUM(x), AVG(y) FROM t WHERE z IN (SELECT z FROM u WHERE w > 1) AND x < 2",
    "SELECT a FROM t WHERE CASE WHEN x > 1 THEN 1 ELSE 0 END = 1 AND y LIKE '%a%' LIMIT 1",
]


def _same_edits(queries: list[tuple[str, dict[str, str] | None]], extended: bool = False) -> tuple[int, int]:
    """Assert spliced == whole for every query's edits (`extended`: with the local kinds of
    `edits_local`, whose tree is the query's own copy); (queries spliced, edits compared)."""
    spliced = compared = 0
    for query, types in queries:
        try:
            tree = sqlast.parse_shared(query)
        except sqlast.SQLParseError:
            continue
        extra = (lambda t, types=types: local_sources(t, types or {}, None)) if extended else None
        whole = edits._raw_edits(query, types, extra, splicing=False)
        assert edits._raw_edits(query, types, extra) == whole, query
        spliced += splice.rendered(tree, sqlast.normalize(query)) is not None
        compared += len(whole)
    return spliced, compared


def _generated() -> list[tuple[str, dict[str, str] | None]]:
    tasks = load_tasks(seed=0, n_tasks=200)
    refs = [(t.reference, (t.features or {}).get("column_types")) for t in tasks]
    drafts = [(e.text, types) for ref, types in refs[:150] for e in edits.raw_edits(ref, types)[:3]]
    return refs + drafts


def test_spliced_edits_are_the_whole_renderings_on_generated_tasks_and_drafts() -> None:
    queries = _generated()
    spliced, compared = _same_edits(queries)
    assert spliced >= 0.9 * len(queries) and compared > 1200  # splicing is what was compared


def test_spliced_transfers_are_the_whole_renderings() -> None:
    queries = _generated()
    contrasts = [
        (sqlast.normalize(q), e.text) for q, types in queries[:120] for e in edits.raw_edits(q, types)[:4]
    ]
    contrasts += [(b, a) for a, b in contrasts]  # each change and its inverse
    rng = random.Random(7)
    applied = 0
    for _ in range(1500):
        (draft, types), (a_minus, a_plus) = rng.choice(queries), rng.choice(contrasts)
        whole = contrast.apply_contrast(draft, a_minus, a_plus, types, splicing=False)
        assert contrast.apply_contrast(draft, a_minus, a_plus, types) == whole, (draft, a_minus, a_plus)
        applied += whole is not None
    assert applied > 200  # transfers that change the draft were compared, not only refusals


def test_extended_grammar_edits_splice_their_base_kinds_exactly() -> None:
    queries = _generated()[:150] + [(q, None) for q in TRICKY]
    spliced, compared = _same_edits(queries, extended=True)
    assert spliced > 100 and compared > _same_edits(queries)[1]  # the local kinds were there too


def test_tricky_queries_fall_back_or_splice_exactly() -> None:
    spliced, _ = _same_edits([(q, None) for q in TRICKY])
    normal = {q: sqlast.normalize(q) for q in TRICKY}
    assert splice.rendered(sqlast.parse_shared(TRICKY[1]), normal[TRICKY[1]]) is None  # WITH: rewritten
    assert splice.rendered(sqlast.parse_shared(TRICKY[2]), normal[TRICKY[2]]) is None  # marker characters
    assert spliced >= 4


@pytest.mark.data
def test_spliced_edits_on_spider_gold_and_predictions(shared_data: Path) -> None:
    from cm_gym.domains.sql import load_spider_tasks

    tasks = load_spider_tasks()
    queries = [(t.reference, (t.features or {}).get("column_types")) for t in tasks]
    for line in (shared_data / "llm-outputs" / "spider" / "predictions.jsonl").read_text().splitlines():
        queries += [
            (text, None) for text in json.loads(line).get("predictions", {}).values() if isinstance(text, str)
        ]
    spliced, compared = _same_edits(queries)
    assert spliced > 0.8 * len(tasks) and compared > 5000
    golds = queries[: len(tasks)]
    assert _same_edits(golds, extended=True)[1] > _same_edits(golds)[1]


def test_without_marking_handlers_nothing_is_spliced(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise TypeError("a generator without a handler table")

    monkeypatch.setattr(splice, "_marking_dispatch", refuse)
    query = TRICKY[0]
    assert splice.rendered(sqlast.parse_shared(query), sqlast.normalize(query)) is None
    assert edits._raw_edits(query, None, None) == edits._raw_edits(query, None, None, splicing=False)


def test_splice_refuses_a_span_that_is_not_the_nodes_own_text() -> None:
    query = "SELECT a FROM t WHERE x > 1 AND y < 2"
    tree = sqlast.parse_shared(query)
    spans = splice.rendered(tree, sqlast.normalize(query))
    assert spans is not None
    node = sqlast.comparisons(tree)[0]
    start, end = spans.span(node)
    assert spans.raw[start:end] == "x > 1"
    flipped = spans.splice(node, lambda n: sqlast.CMP_BY_NAME["GTE"](this=n.this, expression=n.expression))
    assert flipped == "SELECT a FROM t WHERE x >= 1 AND y < 2"
    assert spans.free == {spans.index[id(node)]: True}  # the check is kept for the node
    spans = splice.rendered(tree, sqlast.normalize(query))
    assert spans is not None
    spans.raw = spans.raw.replace("x > 1", "x >  1")  # the span no longer holds what the node renders
    spans.spans[spans.index[id(node)]] = (start, end + 1)
    assert spans.splice(node, lambda n: n) is None
    assert spans.free == {spans.index[id(node)]: False}
    assert spans.span(sqlast.parse("SELECT 1")) is None  # a node of another tree has no span


def test_unmark_refuses_markers_that_do_not_nest_and_drops_twice_rendered_nodes() -> None:
    open_, close = "\ue000", "\ue001"
    assert splice._unmark(f"a{close}b")[0] is None
    assert splice._unmark(f"{open_}\ue101ab")[0] is None
    text, spans = splice._unmark(f"x {open_}\ue101ab{close} {open_}\ue102c{close} {open_}\ue101ab{close}")
    assert text == "x ab c ab" and spans == {2: (5, 6)}
