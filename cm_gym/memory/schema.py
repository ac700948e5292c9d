"""SQLite schema of the record store, its migrations and connection helpers.

The schema version lives in table `schema_version`. `migrate(conn)` applies one function per
version step (`MIGRATIONS[v]` takes a database at version v to v + 1), each inside its own
transaction, so a store written by an older cm_gym opens with a newer one. A store written by a
newer cm_gym, a file that is not SQLite, or a SQLite file that is not a record store gives a
`StoreError` with a clear message. `db_error` maps SQLite's failures to one-line errors that name
the cause: a lock (`StoreLockedError`, never reported as corruption), a full disk
(`StoreFullError`), a read-only file or folder, corruption. Concurrent migrations serialise: each
step re-reads the version inside its ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cm_gym.memory.errors import StoreError, StoreFullError, StoreLockedError, StoreReadOnlyError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 5
BUSY_TIMEOUT_MS = 10_000
#: Metadata key saying what a file is: "live" (a writable store) or "snapshot" (frozen).
STORE_KIND = "store_kind"
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The schema version of snapshots written before `STORE_KIND` existed.
LEGACY_SNAPSHOT_VERSION = 2


def creation_time() -> str:
    """UTC creation time for a store's metadata; ``SOURCE_DATE_EPOCH`` (the reproducible-builds
    convention) pins it, so two builds of the same records are byte-identical files."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    seconds = float(epoch) if epoch.isdigit() else None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


#: Columns of `records` up to schema version 2 (what older stores and snapshots hold).
LEGACY_RECORD_COLUMNS = (
    "record_id",
    "domain",
    "source_task_id",
    "env_id",
    "situation",
    "a_minus",
    "a_plus",
    "evidence",
    "condition",
    "contrast_key",
    "delta",
    "admission_score",
    "u",
    "uses",
    "helpful",
    "harmful",
    "neutral",
    "created_order",
    "embedding",
)
#: Freshness columns added by version 3 (`Record.env_version`, `status`, `status_reason`,
#: `replaces`), with the value a row of an older store reads as.
FRESHNESS_COLUMNS: dict[str, str] = {
    "env_version": "",
    "status": "active",
    "status_reason": "",
    "replaces": "",
}
#: Provenance columns added by version 4 (`Record.a_minus_provenance`, `a_plus_provenance`:
#: real output, real-model revision, simulated, rule-based edit), read as "unknown" in older stores.
PROVENANCE_COLUMNS: dict[str, str] = {"a_minus_provenance": "unknown", "a_plus_provenance": "unknown"}
#: The transform column added by version 5 (`Record.transform`: a generic contrast's executable,
#: site-free edit, issue 32 item 5), read as "" (no transform) in older stores.
TRANSFORM_COLUMNS: dict[str, str] = {"transform": ""}
#: What a column an older store lacks reads as.
COLUMN_DEFAULTS: dict[str, str] = {**FRESHNESS_COLUMNS, **PROVENANCE_COLUMNS, **TRANSFORM_COLUMNS}
#: Columns of `records`, in the order rows are read and written (the embedding last).
RECORD_COLUMNS = (
    LEGACY_RECORD_COLUMNS[:-1]
    + tuple(FRESHNESS_COLUMNS)
    + tuple(PROVENANCE_COLUMNS)
    + tuple(TRANSFORM_COLUMNS)
    + ("embedding",)
)


def _v0_to_v1(conn: sqlite3.Connection) -> None:
    """Version 1: metadata, records (content-hash primary key, float32 embedding blobs)."""
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version (version) VALUES (0)")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        """CREATE TABLE records (
            record_id TEXT PRIMARY KEY,
            domain TEXT NOT NULL,
            source_task_id TEXT NOT NULL,
            env_id TEXT NOT NULL,
            situation TEXT NOT NULL,
            a_minus TEXT NOT NULL,
            a_plus TEXT NOT NULL,
            evidence TEXT NOT NULL,
            condition TEXT NOT NULL,
            contrast_key TEXT NOT NULL,
            delta REAL NOT NULL,
            admission_score REAL NOT NULL,
            u REAL NOT NULL DEFAULT 0,
            uses INTEGER NOT NULL DEFAULT 0,
            helpful INTEGER NOT NULL DEFAULT 0,
            harmful INTEGER NOT NULL DEFAULT 0,
            neutral INTEGER NOT NULL DEFAULT 0,
            created_order INTEGER NOT NULL,
            embedding BLOB NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX records_source ON records (source_task_id)")


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Version 2: resumable builds (processed source tasks), construction counters, key index."""
    conn.execute(
        "CREATE TABLE processed_tasks (task_id TEXT PRIMARY KEY, position INTEGER NOT NULL, "
        "admitted INTEGER NOT NULL DEFAULT 0)"
    )
    conn.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, value REAL NOT NULL)")
    conn.execute(
        "INSERT INTO counters (name, value) SELECT 'next_order', COALESCE(MAX(created_order), -1) + 1 FROM records"
    )
    conn.execute("CREATE INDEX records_key ON records (contrast_key)")


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Version 3: record freshness (environment version verified against, active / retired with
    the reason, the record a repair replaces). Existing rows read as active with an unknown version."""
    for name, default in FRESHNESS_COLUMNS.items():
        conn.execute(f"ALTER TABLE records ADD COLUMN {name} TEXT NOT NULL DEFAULT '{default}'")


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """Version 4: where each record's a⁻ and a⁺ came from (`cm_gym.memory.record.PROVENANCES`).
    Existing rows read as "unknown": nothing recorded it when they were built."""
    for name, default in PROVENANCE_COLUMNS.items():
        conn.execute(f"ALTER TABLE records ADD COLUMN {name} TEXT NOT NULL DEFAULT '{default}'")


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """Version 5: a generic record's executable transform (`Record.transform`). Existing rows
    read as "" (no transform): they were built before transforms were stored."""
    for name, default in TRANSFORM_COLUMNS.items():
        conn.execute(f"ALTER TABLE records ADD COLUMN {name} TEXT NOT NULL DEFAULT '{default}'")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: _v0_to_v1,
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
}


def record_columns(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The `RECORD_COLUMNS` this database's `records` table has (a read-only snapshot of an older
    schema lacks the freshness, provenance or transform columns; readers fill them with
    `COLUMN_DEFAULTS`)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(records)")}
    return tuple(c for c in RECORD_COLUMNS if c in present)


#: SQLite primary result codes (``exc.sqlite_errorcode & 0xFF``) that `db_error` names.
_BUSY, _LOCKED, _READONLY, _FULL, _CANTOPEN = 5, 6, 8, 13, 14


def db_error(path: Path | str, exc: BaseException) -> StoreError:
    """A one-line `StoreError` subclass for a SQLite (or OS) failure on the store at `path`."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if primary in (_BUSY, _LOCKED) or "locked" in text or "busy" in text:
        return StoreLockedError(
            f"{path} is locked by another process (for more than {BUSY_TIMEOUT_MS // 1000} s): "
            "wait for it to finish, or use another file"
        )
    if primary == _FULL or "disk is full" in text or getattr(exc, "errno", None) == errno.ENOSPC:
        return StoreFullError(
            f"no space left while writing {path}: free disk space and retry "
            "(the failed write was rolled back; everything committed before it is intact)"
        )
    if primary == _READONLY or "readonly" in text or "read-only" in text:
        return StoreReadOnlyError(
            f"cannot write {path}: the file or its folder is read-only; copy it somewhere writable "
            "(reading a frozen snapshot needs no write access)"
        )
    if primary == _CANTOPEN or "unable to open" in text:
        return StoreError(f"cannot open {path}: its folder is missing or not accessible")
    return StoreError(f"{path} is not a SQLite database or is corrupt: {exc}")


@contextmanager
def transaction(
    conn: sqlite3.Connection, *, immediate: bool = True, path: Path | str = "the store"
) -> Iterator[sqlite3.Connection]:
    """One explicit transaction (the connection runs in autocommit mode otherwise). A SQLite
    failure (lock timeout, full disk, read-only file) rolls back and becomes one `db_error`."""
    try:
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    except sqlite3.OperationalError as exc:
        raise db_error(path, exc) from None
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                logger.warning("rollback failed on %s", path, exc_info=True)
        if isinstance(exc, sqlite3.OperationalError):
            raise db_error(path, exc) from None
        raise


def connect_rw(path: Path) -> sqlite3.Connection:
    """A read-write connection: WAL, busy timeout, full sync, autocommit (explicit transactions)."""
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            logger.warning("store %s: journal mode is %s, not WAL", path, mode)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.DatabaseError as exc:
        raise db_error(path, exc) from None
    return conn


def connect_ro(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection (`mode=ro`, plus `immutable=1` for frozen snapshots)."""
    if not path.is_file():
        raise StoreError(f"store not found: {path}")
    uri = f"file:{path.resolve().as_posix()}?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise db_error(path, exc) from None
    return conn


def sqlite_bytes(path: Path) -> bytes:
    """The committed state of an SQLite file (WAL included) as one consistent single-file copy, in
    bytes, via SQLite's backup API (the source is opened read-only): a store to ship to a worker,
    or an LLM cache to send through Ray's object store."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "copy.sqlite"
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        target = sqlite3.connect(str(out))
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        return out.read_bytes()


def read_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version (0 for an empty database). A foreign database is a `StoreError`."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return 0
        if "schema_version" not in tables or "records" not in tables:
            raise StoreError(
                f"{path} is a SQLite database but not a cm_gym record store (tables: {sorted(tables)})"
            )
        row = conn.execute("SELECT version FROM schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raise db_error(path, exc) from None
    if row is None:
        raise StoreError(f"{path}: schema_version table is empty (corrupt store)")
    return int(row[0])


def migrate(conn: sqlite3.Connection, path: Path, target: int = SCHEMA_VERSION) -> int:
    """Bring the database to version `target`, one transaction per step. Returns the old version.

    Each step re-reads the version inside its write transaction, so two processes opening the same
    new store at once serialise (the second finds the work done) instead of racing."""
    start = version = read_version(conn, path)
    while True:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has schema version {version}, newer than this cm_gym supports ({SCHEMA_VERSION}); upgrade cm_gym"
            )
        if version >= target:
            return start
        with transaction(conn, path=path):
            version = read_version(conn, path)
            if version >= target:
                return start
            MIGRATIONS[version](conn)
            conn.execute("UPDATE schema_version SET version = ?", (version + 1,))
        logger.info("store %s: migrated schema %d -> %d", path, version, version + 1)
        version += 1


def integrity_ok(conn: sqlite3.Connection) -> bool:
    """SQLite's own `PRAGMA integrity_check`."""
    rows = conn.execute("PRAGMA integrity_check").fetchall()
    return len(rows) == 1 and rows[0][0] == "ok"


def manifest_path(path: str | Path) -> Path:
    """Where a snapshot's manifest lives: ``<snapshot file name>.manifest.json`` next to it."""
    p = Path(path)
    return p.with_name(p.name + ".manifest.json")


def snapshot_reason(path: Path) -> str:
    """Why `path` is a frozen snapshot that must never be opened writable ("" when it is not).

    Decided without writing a byte: a manifest next to it; else, for a file in rollback-journal
    mode (snapshots are; live stores are WAL), its metadata read through an immutable read-only
    connection: ``store_kind = snapshot``, or a record store with no ``store_kind`` at all (a
    snapshot frozen before the key existed)."""
    if manifest_path(path).is_file():
        return f"it has a manifest, {manifest_path(path).name}"
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return ""
    if len(header) < 20 or not header.startswith(_SQLITE_MAGIC) or header[18] == 2:
        return ""  # not SQLite (connect_rw reports it), or WAL mode: a live store
    uri = f"file:{path.resolve().as_posix()}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not {"meta", "records"} <= tables:
                return ""
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (STORE_KIND,)).fetchone()
            version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return ""
    if row is None and version == LEGACY_SNAPSHOT_VERSION:
        return "a record store in rollback-journal mode without a store kind, as older snapshots were written"
    return "its metadata says store_kind=snapshot" if row is not None and row[0] == "snapshot" else ""
