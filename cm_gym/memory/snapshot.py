"""Frozen, hash-verified, read-only snapshots of a record store (SPEC §4, §7; paper C.3).

`freeze_store` writes the snapshot with SQLite's ``VACUUM INTO`` (a consistent copy even while the
source is open), switches it to a rollback journal, and writes ``<snapshot>.manifest.json`` next to
it (sha256 of the file, record count, domain, embedder, creation time). Both land by atomic rename;
a full disk is one `StoreFullError` and leaves neither a partial snapshot nor a temporary file. The
snapshot's own metadata says ``store_kind = snapshot``, so it is never opened writable, manifest or not.
`FrozenStore.open` re-hashes the file against the manifest, opens it with ``mode=ro&immutable=1``,
loads everything into memory and closes it; every write method raises `StoreReadOnlyError`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.schema import (
    SCHEMA_VERSION,
    STORE_KIND,
    connect_ro,
    db_error,
    manifest_path,
    read_version,
    snapshot_reason,
)
from cm_gym.memory.store import RecordStore
from cm_gym.memory.view import StoreView

logger = logging.getLogger(__name__)

MANIFEST_FORMAT = "cm_gym.memory.snapshot/1"


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


def freeze_store(
    store: StoreView, conn: sqlite3.Connection, path: Path, *, overwrite: bool = False
) -> FrozenStore:
    """Snapshot `store` (whose connection is `conn`) to `path` and return it opened read-only."""
    path = path.resolve()
    if path == store.path.resolve():
        raise StoreError("a snapshot cannot overwrite its own source store")
    if path.exists() and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite=True (or choose another path) to re-freeze")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    mtmp = tmp.with_name(tmp.name + ".manifest")
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
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": str(store.path.resolve()),
        }
        mtmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _fsync(mtmp)
        os.replace(mtmp, manifest_path(path))
        os.replace(tmp, path)
    except (sqlite3.OperationalError, OSError) as exc:
        raise db_error(path, exc) from None
    finally:
        for leftover in (tmp, mtmp):
            leftover.unlink(missing_ok=True)
    logger.info("froze %d records into %s (sha256 %s)", len(store), path, manifest["sha256"][:12])
    return FrozenStore.open(path)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of a snapshot (StoreError when missing or malformed)."""
    mpath = manifest_path(path)
    if not mpath.is_file():
        raise StoreError(f"{path} has no manifest ({mpath.name}); it is not a frozen snapshot")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"{mpath} is not a readable manifest: {exc}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != MANIFEST_FORMAT
        or "sha256" not in manifest
    ):
        raise StoreError(f"{mpath} is not a cm_gym snapshot manifest")
    return manifest


class FrozenStore(StoreView):
    """A read-only snapshot held in memory: `.records`, `.embeddings`, `.domain`, `.embedder_id`,
    `.manifest`, `.path`. Any write raises `StoreReadOnlyError`; nothing here touches the file."""

    read_only = True

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        super().__init__(path)
        self.manifest = manifest

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
        if embedder is not None:
            embedder.check_compatible(store.embedder_id, store.dim)
        return store


def open_store(path: str | Path, *, embedder: Embedder | None = None) -> StoreView:
    """Open either kind: a file with a manifest is a verified `FrozenStore`, a live store a
    writable `RecordStore` (which must exist). A snapshot whose manifest is missing is refused —
    it is never opened writable and cannot be verified — and its bytes are left untouched."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"store not found: {path}")
    if manifest_path(path).is_file():
        return FrozenStore.open(path, embedder=embedder)
    reason = snapshot_reason(path)
    if reason:
        raise StoreError(
            f"{path} is a frozen snapshot whose manifest {manifest_path(path).name} is missing: restore "
            "the manifest (or re-freeze from the live store); `cm-gym memory list` can still read it"
        )
    return RecordStore(path, embedder=embedder)


def load_readonly(path: str | Path, *, embedder: Embedder | None = None) -> FrozenStore:
    """Read any store without writing to it: verified when it has a manifest, plain ``mode=ro``
    otherwise (for inspecting a live store)."""
    path = Path(path)
    return FrozenStore.open(path, verify=manifest_path(path).is_file(), embedder=embedder)
