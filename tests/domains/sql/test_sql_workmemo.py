"""The SQL work memo (issue 35): what a later process reads back is exactly what the sqlglot code
computes — edits, contrasts, applications, normal forms, parse flags — on the drafts the
simulated LLM makes, and a stored value that does not decode is computed again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cm_gym.domains.catalog import get_benchmark
from cm_gym.domains.sql import contrast, edits, reply, sqlast, workmemo
from cm_gym.llm.simulated import SimulatedLLM

from .conftest import overwrite_stored_values


@pytest.fixture
def fresh_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty work memo, and no in-process memo in front of it."""
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    clear_process_memos()
    yield tmp_path / "cache"
    clear_process_memos()


def clear_process_memos() -> None:
    for fn in (edits._base_edits, contrast._infer_cached, sqlast._normalized, sqlast._parse_cached):
        fn.cache_clear()


def drafts_and_pairs() -> tuple[list[str], list[tuple[str, str]], list[tuple[str, ...]]]:
    tasks = list(get_benchmark("SQL").load_tasks("train"))[:40]
    sim = SimulatedLLM(seed=3)
    drafts, pairs, types = [], [], []
    for task in tasks:
        blind = dataclasses.replace(task, reference="")
        column_types = tuple((blind.features or {}).get("column_types", {}).items())
        for draft in {sim.draft_action(task, failed) for failed in (0, 1)}:
            drafts.append(draft)
            types.append(column_types)
            pairs += [(draft, e.text) for e in edits.raw_edits(draft)[:3]]
    return drafts, pairs, types


def test_a_later_process_reads_exactly_what_was_computed(fresh_memo: Path) -> None:
    drafts, pairs, types = drafts_and_pairs()
    texts = drafts + ["SELECT (((", "SELECT 1; SELECT 2"]
    computed = (
        [edits._base_edits(d, t) for d, t in zip(drafts, types, strict=True)],
        [contrast.infer_contrast(a, b) for a, b in pairs],
        [sqlast.try_normalize(t) for t in texts],
        [reply._parses(t) for t in texts],
    )
    workmemo.sql_work().close()  # as a later process: the file is opened again
    clear_process_memos()
    before = workmemo.sql_work().hits
    read = (
        [edits._base_edits(d, t) for d, t in zip(drafts, types, strict=True)],
        [contrast.infer_contrast(a, b) for a, b in pairs],
        [sqlast.try_normalize(t) for t in texts],
        [reply._parses(t) for t in texts],
    )
    assert read == computed
    assert workmemo.sql_work().hits - before >= len(drafts) + len(pairs) + len(texts)
    assert sum(len(e) for e in computed[0]) > 100 and any(c is not None for c in computed[1])
    assert not computed[3][-2] and computed[3][0]


def test_a_parse_error_is_raised_again_from_the_memo(fresh_memo: Path) -> None:
    with pytest.raises(sqlast.SQLParseError) as first:
        sqlast.normalize("SELECT FROM WHERE")
    workmemo.sql_work().close()
    clear_process_memos()
    with pytest.raises(sqlast.SQLParseError) as again:
        sqlast.normalize("SELECT FROM WHERE")
    assert str(again.value) == str(first.value)


def test_stored_values_that_do_not_decode_are_computed_again(fresh_memo: Path) -> None:
    drafts, pairs, types = drafts_and_pairs()
    want = [edits._base_edits(d, t) for d, t in zip(drafts[:5], types[:5], strict=True)]
    norms = [sqlast.try_normalize(d) for d in drafts[:5]]
    memo = workmemo.sql_work()
    memo.close()
    overwrite_stored_values(memo.path, "X'00FF'")
    clear_process_memos()
    assert [edits._base_edits(d, t) for d, t in zip(drafts[:5], types[:5], strict=True)] == want
    assert [sqlast.try_normalize(d) for d in drafts[:5]] == norms
