"""Frozen snapshots: manifest hash, read-only behaviour, tamper / corruption detection, open_store."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import EmbedderMismatchError, StoreError, StoreLockedError, StoreReadOnlyError
from cm_gym.memory.opening import open_store
from cm_gym.memory.snapshot import FrozenStore, load_readonly, manifest_path
from cm_gym.memory.store import RecordStore


@pytest.fixture
def filled(store: RecordStore, make_record) -> RecordStore:
    for i in range(4):
        store.add(make_record(condition='mentions_any("at least")' if i % 2 else ""))
    store.update_reuse(store.records[0].record_id, 1, 0.3)
    store.mark_processed("mt-0000", counters={"admitted": 4})
    return store


def test_freeze_writes_a_verifiable_snapshot(filled: RecordStore, tmp_path: Path) -> None:
    snap_path = tmp_path / "snap.sqlite"
    snap = filled.freeze(snap_path)
    manifest = json.loads(manifest_path(snap_path).read_text())
    assert manifest["sha256"] == hashlib.sha256(snap_path.read_bytes()).hexdigest()
    assert manifest["records"] == 4 and manifest["domain"] == "memtoy"
    assert manifest["embedder_id"] == Embedder().embedder_id and manifest["processed_tasks"] == 1
    assert snap.records == filled.records
    assert np.array_equal(snap.embeddings, filled.embeddings)
    assert snap.processed_task_ids == {"mt-0000"} and snap.manifest == manifest
    # the snapshot is a rollback-journal database, not WAL, and passes SQLite's integrity check
    conn = sqlite3.connect(f"file:{snap_path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_snapshot_is_immutable_and_independent_of_its_source(
    filled: RecordStore, tmp_path: Path, make_record
) -> None:
    snap_path = tmp_path / "snap.sqlite"
    filled.freeze(snap_path)
    digest = hashlib.sha256(snap_path.read_bytes()).hexdigest()
    filled.add(make_record())
    snap = FrozenStore.open(snap_path)
    assert len(snap) == 4 and len(filled) == 5
    r = snap.records[0]
    for attempt in (
        lambda: snap.add(make_record()),
        lambda: snap.admit(make_record(), evict=[r.record_id]),
        lambda: snap.remove([r.record_id]),
        lambda: snap.update_reuse(r.record_id, 1, 0.3),
        lambda: snap.mark_processed("x"),
        lambda: snap.set_meta("k", "v"),
    ):
        with pytest.raises(StoreReadOnlyError):
            attempt()
    assert not snap.embeddings.flags.writeable
    assert hashlib.sha256(snap_path.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("snap")) == [
        "snap.sqlite",
        "snap.sqlite.manifest.json",
    ]  # opening created no -wal / -shm / journal files


def test_tampered_or_truncated_snapshot_is_detected(filled: RecordStore, tmp_path: Path) -> None:
    snap_path = tmp_path / "snap.sqlite"
    filled.freeze(snap_path)
    data = bytearray(snap_path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap_path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="does not match its manifest"):
        FrozenStore.open(snap_path)
    snap_path.write_bytes(bytes(data[: len(data) // 3]))
    with pytest.raises(StoreError, match="does not match its manifest"):
        FrozenStore.open(snap_path)


def test_missing_or_bad_manifest(filled: RecordStore, tmp_path: Path) -> None:
    snap_path = tmp_path / "snap.sqlite"
    filled.freeze(snap_path)
    mpath = manifest_path(snap_path)
    mpath.write_text("{not json")
    with pytest.raises(StoreError, match="not a readable manifest"):
        FrozenStore.open(snap_path)
    mpath.write_text(json.dumps({"format": "something else", "sha256": "x"}))
    with pytest.raises(StoreError, match="not a cm_gym snapshot manifest"):
        FrozenStore.open(snap_path)
    mpath.unlink()
    with pytest.raises(StoreError, match="no manifest"):
        FrozenStore.open(snap_path)
    # without verification it still opens read-only
    assert len(FrozenStore.open(snap_path, verify=False)) == 4


def test_freeze_refuses_to_overwrite_unless_asked(filled: RecordStore, tmp_path: Path, make_record) -> None:
    snap_path = tmp_path / "snap.sqlite"
    filled.freeze(snap_path)
    with pytest.raises(StoreError, match="exists"):
        filled.freeze(snap_path)
    filled.add(make_record())
    assert len(filled.freeze(snap_path, overwrite=True)) == 5
    with pytest.raises(StoreError, match="own source"):
        filled.freeze(filled.path, overwrite=True)


def test_corrupt_and_foreign_files_as_snapshots(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"\x00garbage" * 200)
    with pytest.raises(StoreError, match="not a SQLite database"):
        FrozenStore.open(bad, verify=False)
    foreign = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a cm_gym record store"):
        load_readonly(foreign)
    with pytest.raises(StoreError, match="not found"):
        open_store(tmp_path / "missing.sqlite")


def test_open_store_picks_the_right_kind(filled: RecordStore, tmp_path: Path) -> None:
    snap_path = tmp_path / "snap.sqlite"
    filled.freeze(snap_path)
    assert isinstance(open_store(snap_path), FrozenStore)
    with pytest.raises(StoreLockedError, match="in use by another process"):
        open_store(filled.path)  # one writer at a time: `filled` still holds it
    filled.close()
    live = open_store(filled.path)
    assert isinstance(live, RecordStore) and len(live) == 4
    live.close()
    ro = load_readonly(filled.path)  # a live WAL store, read without writing
    assert ro.read_only and len(ro) == 4


def test_embedder_mismatch_on_a_snapshot(filled: RecordStore, tmp_path: Path) -> None:
    snap_path = tmp_path / "snap.sqlite"
    filled.freeze(snap_path)
    with pytest.raises(EmbedderMismatchError):
        FrozenStore.open(snap_path, embedder=Embedder(ngram_range=(1, 2)))
