"""Provenance on records (issue 32): each record says whether its a⁻ and a⁺ are real outputs,
real-model revisions, simulated text or rule-based edits; old stores load ("unknown"); a store
built on real drafts admits only real a⁻ by default; `cm-gym memory show` prints the mark."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cm_gym.cli import main
from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.provenance import A_MINUS_NOT_REAL, a_minus_refusal, provenance_of, unmarked_provenance
from cm_gym.memory.record import Record, compute_record_id
from cm_gym.memory.schema import LEGACY_RECORD_COLUMNS, MIGRATIONS, SCHEMA_VERSION, STORE_KIND
from cm_gym.memory.snapshot import load_readonly
from cm_gym.memory.store import RecordStore


def test_the_mark_of_each_reply_kind_and_the_admission_rule() -> None:
    assert provenance_of("real:gpt-4-zero-shot", revision=False) == "real"
    assert provenance_of("real:gpt-4-zero-shot", revision=True) == "real-revision"
    assert provenance_of("simulated", revision=True) == "simulated"
    assert provenance_of("", revision=False) == "unknown"
    assert provenance_of("transform", revision=True) == "edit"  # a record's transform, no LLM
    assert provenance_of("", revision=False, unmarked=unmarked_provenance(SimulatedLLM())) == "simulated"
    # auto: a simulated a⁻ is refused when the draft was real, admitted on simulated drafts
    assert a_minus_refusal("auto", "simulated", "real") == A_MINUS_NOT_REAL
    assert a_minus_refusal("auto", "real-revision", "real") is None
    assert a_minus_refusal("auto", "simulated", "simulated") is None
    assert a_minus_refusal("real", "simulated", "simulated") == A_MINUS_NOT_REAL
    assert a_minus_refusal("any", "simulated", "real") is None
    with pytest.raises(ValueError, match="admit_a_minus"):
        ConstructionConfig(admit_a_minus="sometimes")


def test_the_mark_is_stored_and_shown(
    store: RecordStore, make_record: Callable[..., Record], capsys: pytest.CaptureFixture[str]
) -> None:
    r = store.add(make_record(a_minus_provenance="real", a_plus_provenance="edit"))
    plain = store.add(make_record())
    store.close()
    again = load_readonly(store.path)
    assert again.get(r.record_id).a_minus_provenance == "real"
    assert again.get(r.record_id).a_plus_provenance == "edit"
    assert again.get(plain.record_id).provenance == "a⁻ unknown, a⁺ unknown"
    assert r.record_id == Record.create(**{k: v for k, v in r.to_dict().items() if k in (
        "domain", "source_task_id", "env_id", "situation", "a_minus", "a_plus", "evidence", "condition",
        "contrast_key", "delta")}).record_id  # fmt: skip
    assert Record.from_dict(r.to_dict()) == r and Record.from_dict(r.to_dict()).a_plus_provenance == "edit"
    assert main(["memory", "show", str(store.path), r.record_id]) == 0
    assert "provenance    a- real, a+ edit (real = a real system's output verbatim" in capsys.readouterr().out


def _v3_store(path: Path, kind: str = "live") -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for v in range(3):
        MIGRATIONS[v](conn)
    conn.execute("UPDATE schema_version SET version = 3")
    emb = Embedder()
    meta = [("domain", "sql"), ("embedder_id", emb.embedder_id), ("dim", "512"), (STORE_KIND, kind)]
    conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
    row = ["abcd" * 4, "sql", "t1", "hr", "q", "a-", "a+", "{}", "", "k", 1.0, 0.5, 0.0, 0, 0, 0, 0, 0]
    row += [np.zeros(512, "<f4").tobytes(), "", "active", "", ""]  # v3 added its columns at the end
    conn.execute(f"INSERT INTO records VALUES ({', '.join('?' * (len(LEGACY_RECORD_COLUMNS) + 4))})", row)
    conn.close()


def test_a_store_written_before_provenance_loads_as_unknown(tmp_path: Path) -> None:
    snapshot_like = tmp_path / "v3-readonly.sqlite"
    _v3_store(snapshot_like)
    (r,) = load_readonly(snapshot_like).records  # read without migrating
    assert (r.a_minus_provenance, r.a_plus_provenance) == ("unknown", "unknown")
    live = tmp_path / "v3.sqlite"
    _v3_store(live)
    with RecordStore(live) as s:  # a writable open migrates 3 -> 4 -> 5
        assert s._conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION == 5
        assert s.records[0].a_minus_provenance == "unknown"
        assert s.records[0].transform == ""  # version 5: built before transforms were stored


@pytest.mark.data
def test_real_draft_stores_admit_only_real_a_minus_unless_told_otherwise(shared_data: Path) -> None:
    """On GPT-4 zero-shot's real Spider drafts, construction-time reuse revises real drafts with the
    simulated reviser: those disturbances were stored as a⁻ with no mark; now they are marked and,
    by default, refused."""
    from cm_gym.domains.registry import get_domain
    from cm_gym.llm.factory import make_llm
    from cm_gym.protocol import ProtocolConfig
    from cm_gym.protocol.stores import prepare

    cfg = ProtocolConfig(benchmark="SpiderSQL", llm="recorded:gpt-4-zero-shot")
    prepared = prepare(cfg)
    domain = get_domain("sql")
    tasks = [prepared.tasks[i] for i in prepared.split.build]
    built: dict[str, tuple[list[Record], dict[str, int]]] = {}
    for policy in ("auto", "any"):
        llm = make_llm(cfg.llm, task_lookup=prepared.tasks.get)
        with tempfile.TemporaryDirectory() as tmp, RecordStore(Path(tmp) / "s.sqlite", domain="sql") as store:
            summary = build_memory(
                domain, tasks, store, llm, domain.make_evaluator(), ConstructionConfig(admit_a_minus=policy)
            )
            built[policy] = (list(store.records), dict(summary.rejected))
    kept, rejected = built["auto"]
    assert kept and {r.a_minus_provenance for r in kept} == {"real"}  # the published SQL verbatim
    assert rejected.get(A_MINUS_NOT_REAL, 0) > 0
    assert {r.a_plus_provenance for r in kept} <= {"simulated", "edit"}  # no real a⁺ exists here
    everything, _ = built["any"]
    assert "simulated" in {r.a_minus_provenance for r in everything}  # what used to enter unmarked
    recordings = {prepared.tasks[i].task_id: prepared.tasks[i] for i in prepared.split.build}
    from cm_gym.llm.recordings import load_recordings, spider_key

    rows = load_recordings("spider")
    for r in kept:  # a real a⁻ is the published output (parsed), nothing else
        task = recordings[r.source_task_id]
        published = rows.get(spider_key(task.env_id, task.prompt), "gpt-4-zero-shot")
        assert published is not None and r.a_minus == domain.parse_action(published.text)


def test_a_transform_is_stored_read_back_and_shown_to_the_agent(
    store: RecordStore, make_record: Callable[..., Record], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32 item 5: a generic record's executable transform survives the store and a frozen
    read, is not part of the content hash, and reaches the agent through `record_view`."""
    from cm_gym.memory.retrieval import record_view

    spec = '{"frm": "GT", "kind": "cmp", "to": "GTE"}'
    r = store.add(make_record(transform=spec))
    plain = store.add(make_record())
    store.close()
    again = load_readonly(store.path)
    assert again.get(r.record_id).transform == spec and again.get(plain.record_id).transform == ""
    assert Record.from_dict(r.to_dict()).transform == spec
    assert r.record_id == compute_record_id(r.domain, r.a_minus, r.a_plus, r.condition)  # hash unchanged
    assert record_view(again.get(r.record_id)).transform == spec
    assert main(["memory", "show", str(store.path), r.record_id]) == 0
    assert f"transform     {spec}" in capsys.readouterr().out
