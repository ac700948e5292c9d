"""The persistent record store M on SQLite (SPEC §2, paper B.3).

`RecordStore` is the writable store used by construction: WAL journal, a busy timeout, one
transaction per admission / eviction / reuse update, the content hash as primary key (the same
contrast is never stored twice), embeddings as float32 blobs. One writer at a time: opening takes
an exclusive lock (`cm_gym.memory.locking`), so a second builder waits up to `lock_timeout` or gets
a one-line `StoreLockedError`. A frozen snapshot is never opened writable, even when its manifest
is missing (the snapshot's own metadata says what it is), so its bytes never change. Everything is mirrored in memory
(records, the embedding matrix, a contrast-key index), kept in sync after each commit, so that
retrieval searches with NumPy and never queries SQLite. `freeze(path)` writes a read-only,
hash-verified snapshot (`cm_gym.memory.snapshot.FrozenStore`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import DuplicateRecordError, StoreError, StoreReadOnlyError
from cm_gym.memory.locking import FileLock, lock_path_for
from cm_gym.memory.record import Record, compute_record_id
from cm_gym.memory.schema import (
    RECORD_COLUMNS,
    STORE_KIND,
    connect_rw,
    creation_time,
    integrity_ok,
    migrate,
    snapshot_reason,
    transaction,
)
from cm_gym.memory.view import DEFAULT_CAPACITY, StoreView

if TYPE_CHECKING:
    from cm_gym.memory.snapshot import FrozenStore

logger = logging.getLogger(__name__)


class RecordStore(StoreView):
    """A writable SQLite record store. Opening an existing file checks its schema (migrating an
    older one), its domain and its embedder; a new file is initialised with the given metadata."""

    read_only = False

    def __init__(
        self,
        path: str | Path,
        *,
        domain: str | None = None,
        benchmark: str | None = None,
        capacity: int | None = None,
        embedder: Embedder | None = None,
        lock_timeout: float = 0.0,
    ) -> None:
        super().__init__(Path(path))
        if self.path.exists() and self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not a store file")
        if self.path.is_file():
            reason = snapshot_reason(self.path)
            if reason:
                raise StoreReadOnlyError(
                    f"{self.path} is a frozen snapshot ({reason}): it is never opened writable; read it with "
                    "FrozenStore.open / open_store, or build into another file"
                )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder of {self.path}: {exc.strerror}") from None
        self._lock = FileLock(lock_path_for(self.path), what=f"store {self.path}")
        self._lock.acquire(timeout=lock_timeout)
        try:
            self._conn = connect_rw(self.path)
        except BaseException:
            self._lock.release()
            raise
        try:
            if migrate(self._conn, self.path) == 0:  # a new file: check and insert in one transaction
                with transaction(self._conn, path=self.path):
                    if not self._has_meta():
                        self._init_meta(domain, benchmark, capacity, embedder)
            self._load(self._conn)
            self.embedder = embedder or Embedder.from_id(self.embedder_id)
            self.embedder.check_compatible(self.embedder_id, self.dim)
            if domain is not None and domain != self.domain:
                raise StoreError(f"{self.path} holds {self.domain!r} records, not {domain!r}")
            if benchmark and self.benchmark and benchmark != self.benchmark:
                raise StoreError(f"{self.path} was built for benchmark {self.benchmark!r}, not {benchmark!r}")
        except BaseException:
            self._conn.close()
            self._lock.release()
            raise
        if capacity is not None and capacity != self.capacity:
            self.set_meta("capacity", str(int(capacity)))

    def _has_meta(self) -> bool:
        return self._conn.execute("SELECT count(*) FROM meta").fetchone()[0] > 0

    def _init_meta(
        self, domain: str | None, benchmark: str | None, capacity: int | None, embedder: Embedder | None
    ) -> None:
        if not domain:
            raise StoreError(f"{self.path} is a new store: its domain must be given")
        emb = embedder or Embedder()
        meta = {
            "domain": domain,
            "benchmark": benchmark or "",
            "capacity": str(int(capacity if capacity is not None else DEFAULT_CAPACITY)),
            "embedder_id": emb.embedder_id,
            "dim": str(emb.dim),
            "created": creation_time(),
            STORE_KIND: "live",
        }
        self._conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())

    # -- writes -------------------------------------------------------------------------------
    def _embedding_for(self, record: Record, embedding: np.ndarray | None) -> np.ndarray:
        if record.domain != self.domain:
            raise StoreError(f"record domain {record.domain!r} does not match store domain {self.domain!r}")
        expected = compute_record_id(record.domain, record.a_minus, record.a_plus, record.condition)
        if record.record_id != expected:
            raise ValueError(f"record_id {record.record_id!r} is not the content hash {expected!r}")
        emb = self.embedder.embed_one(record.situation) if embedding is None else embedding
        emb = np.asarray(emb, dtype=np.float32).reshape(-1)
        if emb.shape != (self.dim,):
            raise ValueError(f"embedding has shape {emb.shape}, store dim is {self.dim}")
        return emb.copy()

    def _insert(self, record: Record, emb: np.ndarray) -> None:
        row = [getattr(record, c) for c in RECORD_COLUMNS[:-1]]
        row[RECORD_COLUMNS.index("evidence")] = json.dumps(dict(record.evidence), sort_keys=True)
        row.append(emb.astype("<f4").tobytes())
        try:
            self._conn.execute(
                f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) VALUES ({', '.join('?' * len(RECORD_COLUMNS))})",
                row,
            )
        except sqlite3.IntegrityError:
            raise DuplicateRecordError(f"record {record.record_id} is already stored") from None
        self._conn.execute(
            "INSERT INTO counters (name, value) VALUES ('next_order', ?) "
            "ON CONFLICT(name) DO UPDATE SET value = MAX(value, excluded.value)",
            (record.created_order + 1,),
        )

    def add(self, record: Record, embedding: np.ndarray | None = None) -> Record:
        """Insert one record in its own transaction (DuplicateRecordError if its hash is stored)."""
        return self.admit(record, embedding, evict=())

    def admit(self, record: Record, embedding: np.ndarray | None = None, evict: Iterable[str] = ()) -> Record:
        """Insert `record` and delete the `evict` ids in ONE transaction (retention at capacity)."""
        emb = self._embedding_for(record, embedding)
        evict = [e for e in evict if e != record.record_id]
        if record.record_id in self._records:
            raise DuplicateRecordError(f"record {record.record_id} is already stored")
        with transaction(self._conn, path=self.path):
            self._insert(record, emb)
            if evict:
                self._conn.executemany("DELETE FROM records WHERE record_id = ?", [(e,) for e in evict])
        for e in evict:
            if e in self._records:
                self._drop(e)
        self._put(record, emb)
        self._counters["next_order"] = max(self._counters.get("next_order", 0), record.created_order + 1)
        self._bump(layout=True)
        return record

    def remove(self, record_ids: Iterable[str]) -> int:
        """Delete records in one transaction; returns how many existed."""
        ids = [i for i in dict.fromkeys(record_ids) if i in self._records]
        if not ids:
            return 0
        with transaction(self._conn, path=self.path):
            self._conn.executemany("DELETE FROM records WHERE record_id = ?", [(i,) for i in ids])
        for i in ids:
            self._drop(i)
        self._bump(layout=True)
        return len(ids)

    def update_reuse(self, record_id: str, label: int, rho: float) -> Record:
        """Eq. 6 on one record (u, uses and the label counters), in one transaction."""
        new = self._records[record_id].with_reuse(label, rho)
        with transaction(self._conn, path=self.path):
            self._conn.execute(
                "UPDATE records SET u = ?, uses = ?, helpful = ?, harmful = ?, neutral = ? WHERE record_id = ?",
                (new.u, new.uses, new.helpful, new.harmful, new.neutral, record_id),
            )
        self._records[record_id] = new
        self._bump(layout=False)
        return new

    def mark_processed(
        self, task_id: str, *, admitted: int = 0, counters: Mapping[str, float] | None = None
    ) -> None:
        """Mark a source task done and add `counters` to the cumulative ones, in one transaction."""
        position = len(self._processed)
        with transaction(self._conn, path=self.path):
            self._conn.execute(
                "INSERT OR REPLACE INTO processed_tasks (task_id, position, admitted) VALUES (?, ?, ?)",
                (task_id, self._processed.get(task_id, position), admitted),
            )
            for name, value in (counters or {}).items():
                self._conn.execute(
                    "INSERT INTO counters (name, value) VALUES (?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                    (name, float(value)),
                )
        self._processed.setdefault(task_id, position)
        for name, value in (counters or {}).items():
            self._counters[name] = self._counters.get(name, 0.0) + float(value)
        self._bump(layout=False)

    def set_meta(self, key: str, value: str) -> None:
        """Set one metadata entry (e.g. the build settings)."""
        with transaction(self._conn, path=self.path):
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
        self._meta[key] = value
        self._bump(layout=False)

    # -- lifecycle ----------------------------------------------------------------------------
    def integrity_check(self) -> bool:
        """SQLite's integrity check on the file."""
        return integrity_ok(self._conn)

    def freeze(self, path: str | Path, *, overwrite: bool = False, ann: bool | None = None) -> FrozenStore:
        """Write an immutable snapshot (VACUUM INTO + manifest with its sha256) and open it.
        `ann`: also build an ANN index for retrieval (None = from `ann.ANN_MIN_RECORDS` records
        on, when faiss-cpu is installed; True = always; False = never)."""
        from cm_gym.memory.snapshot import freeze_store

        return freeze_store(self, self._conn, Path(path), overwrite=overwrite, ann=ann)

    def close(self) -> None:
        """Close the connection and release the writer lock (idempotent)."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._lock.release()

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
