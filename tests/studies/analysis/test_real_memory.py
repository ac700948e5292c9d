"""Memory from real mistakes (`cm_gym.studies.analysis.real_memory`) on a few real GPT-4 Spider failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.domains.registry import get_benchmark
from cm_gym.llm.recordings import load_recordings, spider_key
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.studies.analysis.real_memory import construct_from_recorded, heldout_transfer, split_ids

#: build-side tasks of the standard split whose zero-shot GPT-4 draft fails (the first two are not
#: repaired by one local edit; the last three are), plus two it gets right
FAILING = ["spider-0169", "spider-0170", "spider-0335", "spider-0503", "spider-0517"]
SOLVED = ["spider-0000", "spider-0001"]


@pytest.mark.data
def test_construction_and_transfer_on_real_spider_failures(shared_data: Path, tmp_path: Path) -> None:
    by_id = {t.task_id: t for t in get_benchmark("SpiderSQL").load()}
    rows = load_recordings("spider")
    for tid in FAILING:  # the data folder's own execution check agrees these are real failures
        t = by_id[tid]
        assert rows.get(spider_key(t.env_id, t.prompt), "gpt-4-zero-shot").verdict != "correct"  # type: ignore[union-attr]
    result = construct_from_recorded("SpiderSQL", "gpt-4-zero-shot", tmp_path / "m", FAILING + SOLVED)
    assert (result.tasks, result.excluded, result.first_solved) == (7, 0, 2)
    assert [f["task_id"] for f in result.failures] == FAILING
    assert all(f["alternatives"] >= 1 for f in result.failures)
    repaired = {f["task_id"] for f in result.failures if f["repaired"]}
    assert repaired == set(FAILING[2:])
    assert result.repaired <= result.improved <= len(result.failures)
    sources = {r["source_task_id"] for r in result.records}
    assert sources and sources <= repaired and result.conditioned == len(result.records)
    assert len(FrozenStore.open(result.snapshot).records) == len(result.records)
    summary = result.as_dict()
    assert summary["records_n"] == len(result.records) and summary["repaired_n"] == 3

    held_out = split_ids("SpiderSQL", "eval")[:30]
    assert not set(held_out) & set(FAILING + SOLVED)
    for system in ("gpt-4-zero-shot", "codex-few-shot"):  # its own mistakes, and another system's
        tr = heldout_transfer("SpiderSQL", result.snapshot, system, held_out, store_system="gpt-4-zero-shot")
        assert tr.tasks == 30 and tr.store_records == len(result.records)
        for scope in ("retrieved", "eligible", "any"):
            rate = tr.rate(scope)
            assert rate["failures"] == len(tr.failures) > 0
            assert rate["fixed"] <= rate["covered"] <= rate["failures"]
        assert tr.rate("retrieved")["covered"] <= tr.rate("eligible")["covered"] <= tr.rate("any")["covered"]
    with pytest.raises(ValueError, match="records of held-out tasks"):
        heldout_transfer("SpiderSQL", result.snapshot, "gpt-4-zero-shot", FAILING)
