"""Freshness and re-verification: records carry the environment version they were verified
against; retrieval never offers a retired or out-of-date record; `reverify_store` re-checks a
frozen SQL store on a changed copy of its databases and writes a NEW snapshot, never touching the
source; the CLI does the same end to end."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cm_gym.cli import main as cli_main
from cm_gym.core.splits import make_split
from cm_gym.core.types import AgentState
from cm_gym.domains.environment import environment_versions, load_environment
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.memory.construction import build_memory
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.freshness import FreshView, exclusion_reason
from cm_gym.memory.manifest import LEGACY_FORMATS
from cm_gym.memory.retrieval import Retriever
from cm_gym.memory.reverify import read_report, report_path, reverify_store
from cm_gym.memory.schema import LEGACY_RECORD_COLUMNS, MIGRATIONS, STORE_KIND, manifest_path
from cm_gym.memory.snapshot import FrozenStore, file_sha256
from cm_gym.memory.store import RecordStore


@pytest.fixture(scope="module")
def sql_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, object]:
    """A frozen store built on 60 generated SQL build tasks (real SQLite, simulated LLM)."""
    spec = get_benchmark("SQL")
    domain = get_domain("sql")
    tasks = list(spec.load_tasks())
    split = make_split(tasks, seed=12345)
    by_id = {t.task_id: t for t in tasks}
    root = tmp_path_factory.mktemp("reverify")
    with RecordStore(root / "live.sqlite", domain="sql", benchmark="SQL") as store:
        build_memory(
            domain, [by_id[i] for i in split.build[:60]], store, SimulatedLLM(seed=0), domain.make_evaluator()
        )
        store.freeze(root / "snap.sqlite")
    return root / "snap.sqlite", tasks, domain


def test_new_records_carry_their_environment_version(sql_store: tuple) -> None:
    snap_path, tasks, domain = sql_store
    snap = FrozenStore.open(snap_path)
    by_id = {t.task_id: t for t in tasks}
    assert len(snap) > 0
    for r in snap.records:
        assert r.env_version == domain.environment_version(by_id[r.source_task_id]) != ""
        assert r.active and r.status_reason == "" and r.replaces == ""


@pytest.mark.slow
def test_reverify_writes_a_new_snapshot_with_verdicts(sql_store: tuple, tmp_path: Path) -> None:
    snap_path, tasks, domain = sql_store
    before = file_sha256(snap_path)
    source = FrozenStore.open(snap_path)
    changed, _ = domain.apply_change("rename_column", tasks, tmp_path / "env", seed=0)
    out = tmp_path / "rev.sqlite"
    summary = reverify_store(source, out, changed, domain, domain.make_evaluator(), SimulatedLLM(seed=0))
    assert file_sha256(snap_path) == before  # the frozen source is never written
    new = FrozenStore.open(out)  # a verified snapshot with its own manifest
    assert summary.records_in == len(source)
    counts = summary.counts
    assert counts["repairable"] + counts["stale"] > 0 and counts["valid"] > 0
    by_new = {r.record_id: r for r in new.records}
    versions = environment_versions(domain, changed)
    by_task = {t.task_id: t for t in changed}
    evaluator = domain.make_evaluator()
    for v in summary.verdicts:
        old = by_new[v.record_id]  # every source record is kept, in order
        if v.status == "valid":
            assert old.active and old.env_version in versions[old.env_id]
        elif v.status in ("stale", "repairable"):
            assert (
                old.status == "retired" and old.status_reason == v.reason and "no longer improves" in v.reason
            )
        if v.status == "repairable":
            fixed = by_new[v.repaired_id]
            assert fixed.replaces == v.record_id and fixed.active
            state = AgentState(by_task[fixed.source_task_id])
            gain = (
                evaluator.check(state, _a(fixed.a_plus)).score
                - evaluator.check(state, _a(fixed.a_minus)).score
            )
            assert gain > 0.05  # the repair's evidence is real on the changed environment
    report = read_report(out)
    assert report["counts"] == counts and len(report["verdicts"]) == len(source)
    # retrieval over the new snapshot never offers a retired record
    retriever = Retriever(new, domain, env_versions=versions)
    retired = {r.record_id for r in new.records if not r.active}
    for task in changed[:120]:
        assert not retired & {g.record.record_id for g in retriever.retrieve(task, AgentState(task).render())}
    with pytest.raises(Exception, match="exists"):
        reverify_store(source, out, changed, domain, domain.make_evaluator(), SimulatedLLM(seed=0))
    with pytest.raises(Exception, match="cannot be the source"):
        reverify_store(
            source, snap_path, changed, domain, domain.make_evaluator(), SimulatedLLM(seed=0), overwrite=True
        )


def _a(text: str):  # noqa: ANN202 - local shorthand
    from cm_gym.core.types import Action

    return Action(text)


def test_version_filter_hides_out_of_date_records_only(sql_store: tuple) -> None:
    snap_path, tasks, domain = sql_store
    snap = FrozenStore.open(snap_path)
    current = environment_versions(domain, tasks)
    view = FreshView(snap, current)
    assert view.records is snap.records and view.embeddings is snap.embeddings  # passthrough
    record = snap.records[0]
    moved = {**current, record.env_id: frozenset({"another-version"})}
    assert "now another-version" in (exclusion_reason(record, moved) or "")
    assert exclusion_reason(replace(record, env_version=""), moved) is None  # unknown version: offered
    view = FreshView(snap, moved)
    assert record.record_id in view.excluded and all(r.env_id != record.env_id for r in view.records)
    assert view.embeddings.shape == (len(view.records), snap.dim)
    task = next(t for t in tasks if t.env_id == record.env_id)
    plain = Retriever(snap, domain, use_conditions=False, k=50)
    fresh = Retriever(snap, domain, use_conditions=False, k=50, env_versions=moved)
    got = {g.record.record_id for g in fresh.retrieve(task, "")}
    assert got and not any(snap.get(i).env_id == record.env_id for i in got)
    assert got < {g.record.record_id for g in plain.retrieve(task, "")}
    same = Retriever(snap, domain, k=3, env_versions=current)
    for t in tasks[:60]:  # nothing excluded: exactly the ranking without the filter
        a = [(g.record.record_id, g.rank_score) for g in Retriever(snap, domain, k=3).retrieve(t, "x")]
        assert a == [(g.record.record_id, g.rank_score) for g in same.retrieve(t, "x")]


def test_schema_v2_snapshot_reads_with_fresh_defaults(tmp_path: Path) -> None:
    """A snapshot frozen by an older cm_gym (schema 2: no freshness columns) still opens."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](conn)
    MIGRATIONS[1](conn)
    conn.execute("UPDATE schema_version SET version = 2")
    emb = Embedder()
    meta = [("domain", "sql"), ("embedder_id", emb.embedder_id), ("dim", "512"), (STORE_KIND, "snapshot")]
    conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
    row = ["abcd" * 4, "sql", "t1", "hr", "q", "a-", "a+", "{}", "", "k", 1.0, 0.5, 0.0, 0, 0, 0, 0, 0]
    conn.execute(
        f"INSERT INTO records VALUES ({', '.join('?' * len(LEGACY_RECORD_COLUMNS))})",
        [*row, np.zeros(512, "<f4").tobytes()],
    )
    conn.close()
    manifest = {"format": LEGACY_FORMATS[0], "sha256": file_sha256(path), "records": 1, "domain": "sql"}
    manifest["embedder_id"] = emb.embedder_id
    manifest_path(path).write_text(json.dumps(manifest))
    (r,) = FrozenStore.open(path).records
    assert (r.env_version, r.status, r.status_reason, r.replaces) == ("", "active", "", "")


@pytest.mark.slow
def test_cli_env_change_and_reverify(sql_store: tuple, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    snap_path, _, _ = sql_store
    env_dir = tmp_path / "env"
    assert (
        cli_main(
            ["env", "change", "--benchmark", "SQL", "--family", "view_replaces_table", "--out", str(env_dir)]
        )
        == 0
    )
    moved = tmp_path / "moved"
    env_dir.rename(moved)  # paths inside a changed environment are relative to its folder
    env = load_environment(moved)
    assert all(str(t.meta["db_path"]).startswith(str(moved.resolve())) for t in env.tasks)
    out = tmp_path / "rev.sqlite"
    assert cli_main(["memory", "reverify", str(snap_path), "--env", str(moved), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "0 repairable, 0 stale" in text  # a view in place of a table leaves every record valid
    assert report_path(out).is_file()
    assert (
        cli_main(
            ["memory", "reverify", str(snap_path), "--env", str(tmp_path / "nothing"), "--out", str(out)]
        )
        == 2
    )
