"""Frozen, hash-verified, read-only snapshots of a record store (SPEC §4, §7; paper C.3).

`freeze_store` writes the snapshot with SQLite's ``VACUUM INTO`` (a consistent copy even while the
source is open), switches it to a rollback journal, and writes ``<snapshot>.manifest.json`` next to
it (sha256 of the file, record count, domain, embedder, creation time). Both land by atomic rename;
a full disk is one `StoreFullError` and leaves neither a partial snapshot nor a temporary file. The
snapshot's own metadata says ``store_kind = snapshot``, so it is never opened writable, manifest or not.
`FrozenStore.open` reads the manifest with caps and checks every field (`cm_gym.memory.manifest`:
sealed format 2, the format-1 migration rule), re-hashes the file against it, opens it with
``mode=ro&immutable=1``, loads everything into memory and closes it; every write method raises
`StoreReadOnlyError`.

A snapshot of `ann.ANN_MIN_RECORDS` records or more also gets an ANN index for retrieval
(`cm_gym.memory.ann`, when faiss-cpu is installed): a sidecar ``<snapshot>.ann`` whose sha256,
size, layout digest and every build parameter are in the sealed manifest. Open verifies it; a
missing, modified or unreadable sidecar is reported in one warning and the index is rebuilt in
memory from the verified snapshot (with the manifest's checked parameters) at first use, so
retrieval never reads an index that does not belong to the snapshot; if even the rebuild fails,
that is one warning and retrieval scans exactly — never a raw faiss error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from cm_gym.memory import ann as ann_mod
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.manifest import MANIFEST_FORMAT, read_manifest, seal
from cm_gym.memory.schema import (
    SCHEMA_VERSION,
    STORE_KIND,
    connect_ro,
    creation_time,
    db_error,
    manifest_path,
    read_version,
)
from cm_gym.memory.view import StoreView

logger = logging.getLogger(__name__)

__all__ = [
    "MANIFEST_FORMAT",
    "FrozenStore",
    "copy_snapshot",
    "freeze_store",
    "load_readonly",
    "read_manifest",
]


def ann_path(path: str | Path) -> Path:
    """Where a snapshot's ANN index lives: ``<snapshot file name>.ann`` next to it."""
    p = Path(path)
    return p.with_name(p.name + ".ann")


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _freeze_ann(tmp: Path, final: Path, records: int, ann: bool | None) -> tuple[dict[str, Any] | None, Path]:
    """Build the ANN sidecar of the snapshot being written at `tmp`: (manifest entry, sidecar
    temp path); no entry when the snapshot is small (``ann=None``; below `ann.MIN_BUILD_RECORDS`
    always), ``ann=False``, or faiss-cpu is missing (``ann=True`` then raises
    `AnnUnavailableError`)."""
    side = ann_path(tmp)
    if not (ann if ann is not None else records >= ann_mod.ANN_MIN_RECORDS):
        return None, side
    if not ann_mod.available():
        if ann:
            ann_mod.require()
        logger.info(
            "%s: %d records but faiss-cpu is not installed, so no ANN index; retrieval will scan "
            "exactly (pip install 'cm-gym[ann]' and freeze again)",
            final,
            records,
        )
        return None, side
    if records < ann_mod.MIN_BUILD_RECORDS:
        logger.info(
            "%s: %d records are searched exactly; no ANN index below %d",
            final,
            records,
            ann_mod.MIN_BUILD_RECORDS,
        )
        return None, side
    index = ann_mod.build_for_source(FrozenStore.open(tmp, verify=False))
    index.save(side)
    _fsync(side)
    entry = {
        "file": ann_path(final).name,
        "sha256": file_sha256(side),
        "bytes": side.stat().st_size,
        "records": index.n,
        "dim": index.dim,
        "digest": index.digest,
        "params": index.params,
    }
    return entry, side


def freeze_store(
    store: StoreView,
    conn: sqlite3.Connection,
    path: Path,
    *,
    overwrite: bool = False,
    ann: bool | None = None,
) -> FrozenStore:
    """Snapshot `store` (whose connection is `conn`) to `path` and return it opened read-only.
    `ann`: build an ANN index (None = when the store has `ann.ANN_MIN_RECORDS` records or more
    and faiss-cpu is installed; True = always, False = never)."""
    path = path.resolve()
    if path == store.path.resolve():
        raise StoreError("a snapshot cannot overwrite its own source store")
    if path.exists() and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite=True (or choose another path) to re-freeze")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    mtmp = tmp.with_name(tmp.name + ".manifest")
    side = ann_path(tmp)
    try:
        conn.execute("VACUUM INTO ?", (str(tmp),))
        out = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            out.execute("PRAGMA journal_mode = DELETE")
            out.execute(
                "INSERT INTO meta (key, value) VALUES (?, 'snapshot') "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (STORE_KIND,),
            )
        finally:
            out.close()
        _fsync(tmp)
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT,
            "sha256": file_sha256(tmp),
            "bytes": tmp.stat().st_size,
            "records": len(store),
            "domain": store.domain,
            "benchmark": store.benchmark,
            "embedder_id": store.embedder_id,
            "dim": store.dim,
            "capacity": store.capacity,
            "schema_version": SCHEMA_VERSION,
            "processed_tasks": len(store.processed_task_ids),
            "created": creation_time(),
            "source": str(store.path.resolve()),
        }
        entry, side = _freeze_ann(tmp, path, len(store), ann)
        if entry is not None:
            manifest["ann"] = entry
        manifest = seal(manifest)
        mtmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _fsync(mtmp)
        if entry is not None:
            os.replace(side, ann_path(path))
        else:
            ann_path(path).unlink(missing_ok=True)  # a previous freeze's index is not this one's
        os.replace(mtmp, manifest_path(path))
        os.replace(tmp, path)
    except (sqlite3.OperationalError, OSError) as exc:
        raise db_error(path, exc) from None
    finally:
        for leftover in (tmp, mtmp, side):
            leftover.unlink(missing_ok=True)
    logger.info("froze %d records into %s (sha256 %s)", len(store), path, manifest["sha256"][:12])
    return FrozenStore.open(path)


def copy_snapshot(source: str | Path, target: str | Path) -> FrozenStore:
    """Copy the verified frozen snapshot `source` to `target` with its manifest (and its ANN
    sidecar, renamed in a resealed manifest: the entry names its file), replacing a snapshot at
    `target`; the copy lands file by file, manifest last. Returns the copy opened (verified)."""
    import shutil

    src, dst = Path(source), Path(target)
    manifest = FrozenStore.open(src).manifest  # verified before anything is copied
    for stale in (manifest_path(dst), ann_path(dst), dst):
        stale.unlink(missing_ok=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    if isinstance(manifest.get("ann"), dict):
        shutil.copyfile(ann_path(src), ann_path(dst))
        manifest = seal({**manifest, "ann": {**manifest["ann"], "file": ann_path(dst).name}})
    manifest_path(dst).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return FrozenStore.open(dst)


class FrozenStore(StoreView):
    """A read-only snapshot held in memory: `.records`, `.embeddings`, `.domain`, `.embedder_id`,
    `.manifest`, `.path`. Any write raises `StoreReadOnlyError`; nothing here touches the file."""

    read_only = True

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        super().__init__(path)
        self.manifest = manifest
        self._ann: ann_mod.AnnIndex | None = None
        self._ann_rebuild = False
        self.ann_problem = ""  # why the ANN sidecar named by the manifest was not used ("" = fine)

    @property
    def ann_index(self) -> ann_mod.AnnIndex | None:
        """The snapshot's ANN index (None without one, or without faiss-cpu); a missing or
        corrupt sidecar found at open is rebuilt here, in memory, on first use."""
        if self._ann is None and self._ann_rebuild:
            self._ann_rebuild = False
            params = self.manifest["ann"]["params"]  # checked by read_manifest
            try:
                self._ann = ann_mod.build_for_source(self, nlist=params["nlist"], seed=params["seed"])
            except (RuntimeError, ValueError, TypeError, MemoryError) as exc:  # faiss's own errors
                self.ann_problem += f"; rebuilding it failed ({type(exc).__name__})"
                logger.warning(
                    "%s: the ANN index could not be rebuilt (%s: %s); retrieval scans exactly",
                    self.path,
                    type(exc).__name__,
                    str(exc).splitlines()[0][:200] if str(exc) else "",
                )
        return self._ann

    def _open_ann(self) -> None:
        """Verify and load the sidecar the manifest names (see the module docstring)."""
        entry = self.manifest.get("ann")
        if not isinstance(entry, dict):
            return
        if not ann_mod.available():
            logger.info(
                "%s has an ANN index but faiss-cpu is not installed; retrieval scans exactly "
                "(pip install 'cm-gym[ann]')",
                self.path,
            )
            return
        side = ann_path(self.path)
        problem = ""
        if not side.is_file():
            problem = "is missing"
        elif side.stat().st_size != entry.get("bytes") or file_sha256(side) != entry.get("sha256"):
            problem = "does not match the manifest (modified or truncated)"
        else:
            try:
                self._ann = ann_mod.AnnIndex.load(side, entry)
            except (StoreError, KeyError, TypeError, ValueError, RuntimeError, MemoryError) as exc:
                problem = (
                    f"is unreadable ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
                )
        if problem:
            self._ann_rebuild, self.ann_problem = True, f"{side.name} {problem}"
            logger.warning(
                "%s %s; rebuilding the ANN index in memory from the verified snapshot at first "
                "retrieval (freeze again to store it)",
                side,
                problem,
            )

    @classmethod
    def open(cls, path: str | Path, *, verify: bool = True, embedder: Embedder | None = None) -> FrozenStore:
        """Open a snapshot. With `verify`, the manifest must exist and its sha256 must match the
        file (a tampered or truncated snapshot is a `StoreError`). Without it (reading a live
        store read-only, e.g. `cm-gym memory list`), the file is opened ``mode=ro``."""
        path = Path(path)
        if not path.is_file():
            raise StoreError(f"store not found: {path}")
        manifest: dict[str, Any] = {}
        if verify:
            manifest = read_manifest(path)
            digest = file_sha256(path)
            if digest != manifest["sha256"]:
                raise StoreError(
                    f"{path} does not match its manifest (sha256 {digest[:12]} != {manifest['sha256'][:12]}): "
                    "the snapshot was modified or truncated"
                )
        conn = connect_ro(path, immutable=verify)
        try:
            version = read_version(conn, path)
            if version == 0:
                raise StoreError(f"{path} is an empty SQLite database, not a record store")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} has schema version {version}, newer than supported ({SCHEMA_VERSION})"
                )
            store = cls(path, manifest)
            store._load(conn)
        finally:
            conn.close()
        if verify:
            for key, actual in (
                ("records", len(store)),
                ("domain", store.domain),
                ("embedder_id", store.embedder_id),
            ):
                if manifest.get(key) != actual:
                    raise StoreError(
                        f"{path}: manifest says {key}={manifest.get(key)!r}, snapshot has {actual!r}"
                    )
            store._open_ann()
        if embedder is not None:
            embedder.check_compatible(store.embedder_id, store.dim)
        return store


def load_readonly(path: str | Path, *, embedder: Embedder | None = None) -> FrozenStore:
    """Read any store without writing to it: verified when it has a manifest, plain ``mode=ro``
    otherwise (for inspecting a live store)."""
    path = Path(path)
    return FrozenStore.open(path, verify=manifest_path(path).is_file(), embedder=embedder)
