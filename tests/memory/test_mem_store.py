"""RecordStore: add / dedupe / remove / reopen, reuse updates, transactions, schema migration,
corrupt and foreign files, embedder mismatch."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import DuplicateRecordError, EmbedderMismatchError, StoreError
from cm_gym.memory.record import Record, compute_record_id
from cm_gym.memory.schema import LEGACY_RECORD_COLUMNS, MIGRATIONS, SCHEMA_VERSION
from cm_gym.memory.snapshot import load_readonly
from cm_gym.memory.store import RecordStore


@contextlib.contextmanager
def reopened(store: RecordStore) -> Iterator[RecordStore]:
    """The store read back from its file: closed (one writer at a time) and opened again."""
    store.close()
    with RecordStore(store.path) as again:
        yield again


def test_add_and_reopen_keeps_every_field(tmp_path: Path, make_record) -> None:
    path = tmp_path / "s.sqlite"
    with RecordStore(path, domain="memtoy", benchmark="MEMTOY", capacity=50) as s:
        r1 = s.add(make_record(condition='mentions_any("at least")'))
        r2 = s.add(make_record())
        emb = s.embeddings.copy()
        assert [r.record_id for r in s.records] == [r1.record_id, r2.record_id]
    with RecordStore(path) as s2:
        assert s2.records == (r1, r2)
        assert s2.records[0].evidence == r1.evidence and s2.records[0].condition == r1.condition
        assert np.array_equal(s2.embeddings, emb)
        assert (s2.domain, s2.benchmark, s2.capacity, s2.dim) == ("memtoy", "MEMTOY", 50, 512)
        assert s2.next_order() == r2.created_order + 1
        assert s2.integrity_check()


def test_wal_and_busy_timeout(store: RecordStore) -> None:
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_same_contrast_is_never_stored_twice(store: RecordStore, make_record) -> None:
    r = store.add(make_record())
    twin = replace(r, source_task_id="another-task", u=0.5)  # same content hash
    with pytest.raises(DuplicateRecordError):
        store.add(twin)
    assert len(store) == 1 and store.records[0].source_task_id == r.source_task_id
    # whitespace-only differences hash the same
    assert compute_record_id("memtoy", "a  >  1", "a >= 1", "") == compute_record_id(
        "memtoy", "a > 1", "a >= 1", ""
    )


def test_record_id_must_be_the_content_hash(store: RecordStore, make_record) -> None:
    with pytest.raises(ValueError, match="content hash"):
        store.add(replace(make_record(), record_id="0000000000000000"))
    with pytest.raises(StoreError, match="domain"):
        store.add(make_record(domain="sql"))


def test_remove_and_admit_with_eviction_are_atomic(store: RecordStore, make_record) -> None:
    a, b, c = (store.add(make_record()) for _ in range(3))
    assert store.remove([a.record_id, "missing"]) == 1
    assert a.record_id not in store and len(store) == 2
    new = make_record()
    store.admit(new, evict=[b.record_id])
    assert {r.record_id for r in store.records} == {c.record_id, new.record_id}
    # a failing admission (duplicate) must not apply its eviction
    with pytest.raises(DuplicateRecordError):
        store.admit(new, evict=[c.record_id])
    assert c.record_id in store
    with reopened(store) as again:  # read back from disk
        assert {r.record_id for r in again.records} == {c.record_id, new.record_id}


def test_update_reuse_follows_eq6_and_persists(store: RecordStore, make_record) -> None:
    r = store.add(make_record())
    for label in (1, 1, -1, 0):
        store.update_reuse(r.record_id, label, rho=0.3)
    got = store.get(r.record_id)
    u = 0.0
    for y in (1, 1, -1, 0):
        u = 0.7 * u + 0.3 * y
    assert got.u == pytest.approx(u)
    assert (got.uses, got.helpful, got.harmful, got.neutral) == (4, 2, 1, 1)
    assert got.helpful_fraction == pytest.approx(0.5)
    with reopened(store) as again:  # read back from disk
        assert again.get(r.record_id).u == pytest.approx(u)
    with pytest.raises(ValueError):
        store.update_reuse(r.record_id, 2, rho=0.3)


def test_processed_tasks_and_counters_are_cumulative(store: RecordStore) -> None:
    store.mark_processed("t1", admitted=1, counters={"admitted": 1, "alternatives_checked": 4})
    store.mark_processed("t2", counters={"alternatives_checked": 2})
    assert store.processed_task_ids == {"t1", "t2"}
    with reopened(store) as again:  # read back from disk
        assert again.processed_task_ids == {"t1", "t2"}
        assert again.counters["alternatives_checked"] == 6 and again.counters["admitted"] == 1


def test_get_by_unique_prefix(store: RecordStore, make_record) -> None:
    r = store.add(make_record())
    assert store.get(r.record_id[:6]) == r
    with pytest.raises(KeyError):
        store.get("zzzz")


def test_migration_from_version_1(tmp_path: Path, make_record) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](conn)
    conn.execute("UPDATE schema_version SET version = 1")
    emb = Embedder()
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("domain", "memtoy"), ("embedder_id", emb.embedder_id), ("dim", "512"), ("capacity", "200")],
    )
    r = make_record(created_order=7)
    row = [getattr(r, c) for c in LEGACY_RECORD_COLUMNS[:-1]]
    row[LEGACY_RECORD_COLUMNS.index("evidence")] = '{"score_minus": 0.0, "score_plus": 1.0}'
    row.append(emb.embed_one(r.situation).astype("<f4").tobytes())
    conn.execute(f"INSERT INTO records VALUES ({', '.join('?' * len(LEGACY_RECORD_COLUMNS))})", row)
    conn.close()
    with RecordStore(path) as s:
        assert s._conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        assert [x.record_id for x in s.records] == [r.record_id]
        assert s.next_order() == 8  # the v1 -> v2 step seeds the creation counter
        s.mark_processed("t")  # the v2 table exists


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    RecordStore(path, domain="memtoy").close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        RecordStore(path)


def test_corrupt_and_foreign_files_give_clear_errors(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a SQLite database"):
        RecordStore(garbage)
    foreign = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a cm_gym record store"):
        RecordStore(foreign)
    with pytest.raises(StoreError, match="domain must be given"):
        RecordStore(tmp_path / "new.sqlite")
    with pytest.raises(StoreError, match="directory"):
        RecordStore(tmp_path)


def test_corrupt_embedding_blob_is_detected(store: RecordStore, make_record) -> None:
    r = store.add(make_record())
    store._conn.execute("UPDATE records SET embedding = ? WHERE record_id = ?", (b"\x00" * 12, r.record_id))
    with pytest.raises(StoreError, match="embedding blob"):
        load_readonly(store.path)
    store.close()
    with pytest.raises(StoreError, match="embedding blob"):
        RecordStore(store.path)


def test_domain_benchmark_and_embedder_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    RecordStore(path, domain="memtoy", benchmark="MEMTOY", embedder=Embedder(ngram_range=(2, 4))).close()
    with pytest.raises(EmbedderMismatchError):
        RecordStore(path, embedder=Embedder())
    with RecordStore(path) as s:  # without an explicit embedder it uses the store's own
        assert s.embedder.embedder_id == "hashing-char_wb-2to4-512-v1"
    with pytest.raises(StoreError, match="holds 'memtoy' records"):
        RecordStore(path, domain="sql")
    with pytest.raises(StoreError, match="benchmark"):
        RecordStore(path, benchmark="SQL")


def test_records_property_tracks_writes(store: RecordStore, make_record) -> None:
    assert store.records == () and store.embeddings.shape == (0, 512)
    r: Record = store.add(make_record())
    assert store.records == (r,) and store.embeddings.shape == (1, 512)
    rev = store.layout_revision
    store.update_reuse(r.record_id, 1, 0.3)
    assert store.layout_revision == rev and store.records[0].u == pytest.approx(0.3)
