"""SQLite schema of the record store, its migrations and connection helpers.

The schema version lives in table `schema_version`. `migrate(conn)` applies one function per
version step (`MIGRATIONS[v]` takes a database at version v to v + 1), each inside its own
transaction, so a store written by an older cm_gym opens with a newer one. A store written by a
newer cm_gym, a file that is not SQLite, or a SQLite file that is not a record store gives a
`StoreError` with a clear message.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cm_gym.memory.errors import StoreError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 10_000

#: Columns of `records`, in the order rows are read and written.
RECORD_COLUMNS = (
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


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _v0_to_v1, 1: _v1_to_v2}


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """One explicit transaction (the connection runs in autocommit mode otherwise)."""
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
        raise StoreError(f"{path} is not a SQLite database: {exc}") from None
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
        raise StoreError(f"{path} is not a SQLite database: {exc}") from None
    return conn


def read_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version (0 for an empty database). A foreign database is a `StoreError`."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a SQLite database or is corrupt: {exc}") from None
    if not tables:
        return 0
    if "schema_version" not in tables or "records" not in tables:
        raise StoreError(
            f"{path} is a SQLite database but not a cm_gym record store (tables: {sorted(tables)})"
        )
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    if row is None:
        raise StoreError(f"{path}: schema_version table is empty (corrupt store)")
    return int(row[0])


def migrate(conn: sqlite3.Connection, path: Path, target: int = SCHEMA_VERSION) -> int:
    """Bring the database to version `target`, one transaction per step. Returns the old version."""
    version = read_version(conn, path)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this cm_gym supports ({SCHEMA_VERSION}); upgrade cm_gym"
        )
    start = version
    while version < target:
        step = MIGRATIONS[version]
        with transaction(conn):
            step(conn)
            conn.execute("UPDATE schema_version SET version = ?", (version + 1,))
        logger.info("store %s: migrated schema %d -> %d", path, version, version + 1)
        version += 1
    return start


def integrity_ok(conn: sqlite3.Connection) -> bool:
    """SQLite's own `PRAGMA integrity_check`."""
    rows = conn.execute("PRAGMA integrity_check").fetchall()
    return len(rows) == 1 and rows[0][0] == "ok"
