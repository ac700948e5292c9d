"""Inspect and clear the default-store cache (``$CM_GYM_CACHE/stores``), for ``cm-gym cache``.

Each cached snapshot is listed with its benchmark, records, size, age and state: ``ok`` (verified
against its manifest), ``building`` (a work store is being written or was interrupted; the next
`default_snapshot` call resumes it), ``in use`` (another process holds its lock) or the reason it
is unusable (it is rebuilt on next use). Clearing removes a snapshot with its manifest, work store
and lock file, but never one whose lock another process holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from cm_gym.core import boundedjson
from cm_gym.core.paths import cache_root
from cm_gym.memory.errors import StoreError, StoreLockedError
from cm_gym.memory.locking import FileLock
from cm_gym.memory.schema import manifest_path
from cm_gym.memory.snapshot import FrozenStore

STORES = "stores"


@dataclass(frozen=True)
class CachedStore:
    """One default store in the cache."""

    benchmark: str
    key: str
    path: str
    state: str
    records: int | None
    bytes: int
    created: str
    settings: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _entries(folder: Path) -> Iterator[tuple[str, str, Path]]:
    """(benchmark, key, snapshot path) of every entry, including builds without a snapshot yet."""
    names: set[str] = set()
    for p in folder.glob("*.sqlite"):
        names.add(p.stem)
    for p in folder.glob(".*.building.sqlite"):
        names.add(p.name[1 : -len(".building.sqlite")])
    for stem in sorted(names):
        benchmark, _, key = stem.rpartition("-")
        yield benchmark or stem, key, folder / f"{stem}.sqlite"


def _parts(target: Path) -> list[Path]:
    """Every file that belongs to the entry of `target`."""
    work = target.with_name(f".{target.stem}.building.sqlite")
    return [
        target,
        manifest_path(target),
        target.with_name(f".{target.name}.lock"),
        *(Path(str(work) + s) for s in ("", "-wal", "-shm")),
        work.with_name(f".{work.name}.lock"),
    ]


def _in_use(target: Path) -> bool:
    lock = target.with_name(f".{target.name}.lock")
    if not lock.is_file():
        return False
    probe = FileLock(lock)
    try:
        probe.acquire(timeout=0)
    except StoreLockedError:
        return True
    except StoreError:
        return False  # a read-only cache: nobody can be building in it
    probe.release()
    return False


def list_default_stores(benchmark: str | None = None) -> list[CachedStore]:
    """The cached default stores (optionally of one benchmark), sorted by benchmark and key."""
    folder = cache_root() / STORES
    if not folder.is_dir():
        return []
    out = []
    for name, key, target in _entries(folder):
        if benchmark is not None and name != benchmark:
            continue
        size = sum(p.stat().st_size for p in _parts(target) if p.is_file())
        records, created, settings = None, "", {}
        if _in_use(target):
            state = "in use"
        elif not target.is_file():
            state = "building"
        else:
            try:
                snap = FrozenStore.open(target)
                records, created = len(snap), str(snap.manifest.get("created", ""))
                settings = boundedjson.loads(
                    snap.meta.get("build_settings", "{}"), what="build settings", expect=dict
                )
                state = "ok"
            except (StoreError, ValueError) as exc:
                state = f"unusable ({exc})"
        if not created and target.is_file():
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(target.stat().st_mtime))
        out.append(CachedStore(name, key, str(target), state, records, size, created, settings))
    return out


def clear_default_stores(
    benchmark: str | None = None, *, dry_run: bool = False
) -> tuple[list[str], list[str]]:
    """Remove cached default stores; returns (removed paths, skipped because in use)."""
    removed, skipped = [], []
    for entry in list_default_stores(benchmark):
        target = Path(entry.path)
        lock = FileLock(target.with_name(f".{target.name}.lock"), what=f"the cached {entry.benchmark} store")
        try:
            if not dry_run:
                lock.acquire(timeout=0)
        except StoreLockedError:
            skipped.append(entry.path)
            continue
        try:
            if not dry_run:
                for part in _parts(target):
                    part.unlink(missing_ok=True)
            removed.append(entry.path)
        finally:
            lock.release()
    return removed, skipped
