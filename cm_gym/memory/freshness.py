"""Which stored records retrieval may still offer: not retired, and verified against the current
version of their environment (paper App. A: records go stale when tools, schemas or requirements
change; ``cm-gym memory reverify`` re-checks them).

A record carries the content version of its source environment it was last verified against
(`Record.env_version`, from `Domain.environment_version`). Given the versions of the environments
a run serves (``env_versions``: env id → the versions its tasks report, `environment_versions`), a
record is *out of date* when its environment is among them with another version — its last
verification predates the environment it would be applied in — and retrieval never offers it.
A record of unknown version (``""``: built before versions existed) or of an environment the run
does not serve is offered as before. A retired record (`Record.status` = "retired", written by
reverify with its reason) is never offered.

`FreshView` is the filter: a record source over the offerable records. When it excludes nothing
it passes the store's own records, embedding matrix, revisions and ANN index through untouched,
so retrieval over a fresh store is bit-identical to retrieval without the filter.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from cm_gym.memory.record import Record

EnvVersions = Mapping[str, Collection[str]]


def exclusion_reason(record: Record, env_versions: EnvVersions | None = None) -> str | None:
    """Why retrieval must not offer `record` (None: it may)."""
    if not record.active:
        return f"retired: {record.status_reason or 'no reason given'}"
    if env_versions is None or not record.env_version:
        return None
    current = env_versions.get(record.env_id)
    if current is None or record.env_version in current:
        return None
    return (
        f"verified against environment version {record.env_version} of {record.env_id}, "
        f"which is now {', '.join(sorted(current))}"
    )


def needs_filter(source: Any, env_versions: EnvVersions | None) -> bool:
    """Whether retrieval over `source` needs `FreshView`: versions are given, or the source (a
    store with materialised records) holds a retired record."""
    if env_versions is not None:
        return True
    if callable(getattr(source, "index_columns", None)):
        return False  # a synthetic column source has no freshness fields
    return any(not getattr(r, "active", True) for r in source.records)


class FreshView:
    """The records of `source` that retrieval may offer (see the module docstring). Revisions
    mirror the source's, so a retriever rebuilds its index exactly when the store changes."""

    def __init__(self, source: Any, env_versions: EnvVersions | None = None) -> None:
        self.source = source
        self.env_versions = (
            {k: frozenset(v) for k, v in env_versions.items()} if env_versions is not None else None
        )
        self._seen = -1
        self._excluded: dict[str, str] = {}
        self._records: tuple[Record, ...] = ()
        self._current: tuple[int, tuple[Record, ...]] = (-1, ())
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def __getattr__(self, name: str) -> Any:  # domain, embedder_id, dim, path, meta, ...
        if name == "source":
            raise AttributeError(name)
        return getattr(self.source, name)

    @property
    def revision(self) -> int:
        return int(self.source.revision)

    @property
    def layout_revision(self) -> int:
        return int(self.source.layout_revision)

    def _refresh(self) -> None:
        if self._seen == self.source.layout_revision:
            return
        records = self.source.records
        keep: list[int] = []
        excluded: dict[str, str] = {}
        for i, record in enumerate(records):
            reason = exclusion_reason(record, self.env_versions)
            if reason is None:
                keep.append(i)
            else:
                excluded[record.record_id] = reason
        self._excluded = excluded
        if excluded:
            self._records = tuple(records[i] for i in keep)
            matrix = np.asarray(self.source.embeddings)[np.asarray(keep, dtype=np.int64)]
            matrix.setflags(write=False)
            self._matrix = matrix
            self._current = (-1, ())
        self._seen = self.source.layout_revision

    @property
    def excluded(self) -> Mapping[str, str]:
        """record id → why it is not offered."""
        self._refresh()
        return dict(self._excluded)

    @property
    def records(self) -> tuple[Record, ...]:
        self._refresh()
        if not self._excluded:
            return tuple(self.source.records)
        revision, records = self._current
        if revision != self.source.revision:  # u changes without a layout change (reuse updates)
            current = {r.record_id: r for r in self.source.records}
            records = tuple(current[r.record_id] for r in self._records)
            self._current = (self.source.revision, records)
        return records

    @property
    def embeddings(self) -> np.ndarray:
        self._refresh()
        return self.source.embeddings if not self._excluded else self._matrix

    @property
    def index_columns(self) -> Any:
        """The source's column reader when nothing is excluded (else None: build from `records`)."""
        self._refresh()
        return getattr(self.source, "index_columns", None) if not self._excluded else None

    @property
    def ann_index(self) -> Any:
        """The source's ANN index when nothing is excluded (its rows are then these rows)."""
        self._refresh()
        return getattr(self.source, "ann_index", None) if not self._excluded else None

    def __len__(self) -> int:
        return len(self.records)
