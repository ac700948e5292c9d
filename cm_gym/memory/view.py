"""The in-memory mirror of a record store (`StoreView`), shared by the writable `RecordStore` and
the read-only `FrozenStore`: records, the embedding matrix, a contrast-key index, processed source
tasks and construction counters. Write methods here refuse (`StoreReadOnlyError`);
`RecordStore` implements them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core import boundedjson
from cm_gym.memory.errors import StoreError, StoreReadOnlyError
from cm_gym.memory.record import Record
from cm_gym.memory.schema import COLUMN_DEFAULTS, RECORD_COLUMNS, record_columns

DEFAULT_CAPACITY = 200


def record_from_row(
    row: tuple[Any, ...], dim: int, columns: tuple[str, ...] = RECORD_COLUMNS
) -> tuple[Record, np.ndarray]:
    """A `records` row (in `columns` order, `RECORD_COLUMNS` by default) as a Record and its
    float32 embedding; freshness and provenance columns an older store lacks read as their
    defaults (`COLUMN_DEFAULTS`: provenance "unknown")."""
    values = {**COLUMN_DEFAULTS, **dict(zip(columns, row, strict=True))}
    blob = values.pop("embedding")
    if not isinstance(blob, bytes) or len(blob) != 4 * dim:
        raise StoreError(f"record {values.get('record_id')!r}: embedding blob is not {dim} float32 values")
    try:
        values["evidence"] = boundedjson.loads(values["evidence"], what="evidence")
    except (TypeError, ValueError) as exc:
        raise StoreError(f"record {values.get('record_id')!r}: evidence is not JSON ({exc})") from None
    emb = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    return Record(**values), emb


class StoreView:
    """In-memory mirror of a store shared by `RecordStore` and `FrozenStore`.

    `revision` changes on every write; `layout_revision` only when the set of records changes (a
    reuse update changes `u` but not the embedding matrix), so readers can refresh cheaply.
    """

    read_only: bool = True

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._meta: dict[str, str] = {}
        self._records: dict[str, Record] = {}
        self._emb: dict[str, np.ndarray] = {}
        self._by_key: dict[str, list[str]] = {}
        self._processed: dict[str, int] = {}
        self._counters: dict[str, float] = {}
        self.revision = 0
        self.layout_revision = 0
        self._cache_rev = (-1, -1)
        self._records_tuple: tuple[Record, ...] = ()
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    # -- loading ------------------------------------------------------------------------------
    def _load(self, conn: sqlite3.Connection) -> None:
        try:
            self._meta = {k: v for k, v in conn.execute("SELECT key, value FROM meta")}
            for key in ("domain", "embedder_id", "dim"):
                if key not in self._meta:
                    raise StoreError(f"{self.path}: store metadata lacks {key!r} (corrupt or foreign store)")
            columns = record_columns(conn)
            rows = conn.execute(
                f"SELECT {', '.join(columns)} FROM records ORDER BY created_order, record_id"
            ).fetchall()
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "processed_tasks" in tables:
                self._processed = {
                    t: int(p) for t, p in conn.execute("SELECT task_id, position FROM processed_tasks")
                }
            if "counters" in tables:
                self._counters = {n: float(v) for n, v in conn.execute("SELECT name, value FROM counters")}
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read the store ({exc})") from None
        self._records.clear()
        self._emb.clear()
        self._by_key.clear()
        for row in rows:
            record, emb = record_from_row(row, self.dim, columns)
            self._put(record, emb)
        self._bump(layout=True)

    def _put(self, record: Record, emb: np.ndarray) -> None:
        emb.setflags(write=False)
        self._records[record.record_id] = record
        self._emb[record.record_id] = emb
        self._by_key.setdefault(record.contrast_key, []).append(record.record_id)

    def _drop(self, record_id: str) -> None:
        record = self._records.pop(record_id)
        del self._emb[record_id]
        ids = self._by_key.get(record.contrast_key, [])
        if record_id in ids:
            ids.remove(record_id)
        if not ids:
            self._by_key.pop(record.contrast_key, None)

    def _bump(self, *, layout: bool) -> None:
        self.revision += 1
        if layout:
            self.layout_revision += 1

    # -- metadata -----------------------------------------------------------------------------
    @property
    def meta(self) -> Mapping[str, str]:
        return dict(self._meta)

    @property
    def domain(self) -> str:
        return self._meta.get("domain", "")

    @property
    def benchmark(self) -> str:
        return self._meta.get("benchmark", "")

    @property
    def embedder_id(self) -> str:
        return self._meta.get("embedder_id", "")

    @property
    def dim(self) -> int:
        return int(self._meta.get("dim", "0"))

    @property
    def capacity(self) -> int:
        return int(self._meta.get("capacity", str(DEFAULT_CAPACITY)))

    # -- records ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._cache_rev == (self.revision, self.layout_revision):
            return
        if self._cache_rev[1] != self.layout_revision:
            ids = list(self._records)
            matrix = np.stack([self._emb[i] for i in ids]) if ids else np.zeros((0, self.dim), np.float32)
            matrix.setflags(write=False)
            self._matrix = matrix
        self._records_tuple = tuple(self._records.values())
        self._cache_rev = (self.revision, self.layout_revision)

    @property
    def records(self) -> tuple[Record, ...]:
        """All records, in creation order (row i of `embeddings` belongs to record i)."""
        self._refresh()
        return self._records_tuple

    @property
    def embeddings(self) -> np.ndarray:
        """(n, dim) float32 situation embeddings, read-only, aligned with `records`."""
        self._refresh()
        return self._matrix

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def get(self, record_id: str) -> Record:
        """The record with this id (a unique prefix also works); KeyError if absent."""
        if record_id in self._records:
            return self._records[record_id]
        hits = [rid for rid in self._records if rid.startswith(record_id)] if record_id else []
        if len(hits) == 1:
            return self._records[hits[0]]
        raise KeyError(record_id if not hits else f"{record_id} is ambiguous ({len(hits)} records)")

    def embedding_of(self, record_id: str) -> np.ndarray:
        return self._emb[record_id]

    def by_key(self, contrast_key: str) -> list[Record]:
        """Stored records with this contrast key (redundancy / conflict at admission)."""
        return [self._records[i] for i in self._by_key.get(contrast_key, ())]

    @property
    def processed_task_ids(self) -> frozenset[str]:
        """Source tasks whose construction finished (a resumed build skips them)."""
        return frozenset(self._processed)

    @property
    def counters(self) -> Mapping[str, float]:
        """Cumulative construction counters (admitted, rejected_*, evicted, calls, ...)."""
        return dict(self._counters)

    def next_order(self) -> int:
        """The `created_order` the next record gets."""
        return int(self._counters.get("next_order", 0))

    # -- writes (refused here; RecordStore implements them) -----------------------------------------
    def _refuse(self) -> StoreReadOnlyError:
        return StoreReadOnlyError(f"{self.path} is a read-only snapshot; build into a RecordStore instead")

    def add(self, record: Record, embedding: np.ndarray | None = None) -> Record:
        raise self._refuse()

    def admit(self, record: Record, embedding: np.ndarray | None = None, evict: Iterable[str] = ()) -> Record:
        raise self._refuse()

    def remove(self, record_ids: Iterable[str]) -> int:
        raise self._refuse()

    def update_reuse(self, record_id: str, label: int, rho: float) -> Record:
        raise self._refuse()

    def mark_processed(
        self, task_id: str, *, admitted: int = 0, counters: Mapping[str, float] | None = None
    ) -> None:
        raise self._refuse()

    def set_meta(self, key: str, value: str) -> None:
        raise self._refuse()
