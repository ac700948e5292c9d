"""The SQLite layer of the response cache: opening (read-write, read-only, immutable, degraded),
the schema and its migration, retries on a busy file, and one clear error per SQLite failure.

An existing file is looked at read-only *before* it is opened in any other way
(`inspect_cache_file`): it must be a regular file with SQLite's header, must not be a memory
snapshot (a ``.manifest.json`` next to it), and its tables must say it is a cm_gym response cache.
That look opens the file ``immutable`` (no lock, no journal, no ``-wal``/``-shm`` file created,
nothing written); only a file that passes is then opened for writing, where the switch to WAL
happens. So pointing ``--llm-cache`` at a snapshot, a record store or any other file leaves its
bytes exactly as they were.

Kept apart from `cache.py` (keys and the get / put API) so each reads on its own.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cm_gym.llm.errors import CacheCorruptError, CacheError, CacheLockedError, CacheWriteError

logger = logging.getLogger(__name__)

T = TypeVar("T")
SCHEMA_NAME = "cm_gym.llm_response_cache"
SCHEMA_VERSION = "2"
_READABLE_VERSIONS = ("1", "2")
_SQLITE_MAGIC = b"SQLite format 3\x00"
LOCK_RETRIES = 3  # extra attempts after a busy timeout, with a short pause between them
#: SQLite's quick_check reads the whole file: run it on open only up to this size (every env of a
#: vector env opens the cache); larger files are checked page by page as SQLite reads them, and a
#: damaged page is then a `CacheCorruptError` on the read that meets it
VERIFY_MAX_BYTES = 64 * 1024 * 1024


class NotWritableError(CacheWriteError):
    """The file or its folder cannot be written (the "rw" cache then degrades to replay-only)."""


def _sqlite_error(exc: sqlite3.Error, path: Path | None, doing: str) -> CacheError:
    """One clear `CacheError` for an SQLite failure: locked, full, unwritable, or corrupt."""
    text = str(exc)
    low = text.lower()
    name = getattr(exc, "sqlite_errorname", "") or ""
    if "locked" in low or "BUSY" in name:
        return CacheLockedError(
            f"response cache {path} is locked by another process ({doing}; waited and retried): "
            "let the other process finish, or give each process its own --llm-cache and merge "
            "them with `cm-gym cache import`"
        )
    if "full" in low or "FULL" in name:
        return CacheWriteError(
            f"no space left on the disk of response cache {path} ({doing}): free some space; "
            "every reply committed before is intact"
        )
    if "readonly" in low or "read-only" in low or "READONLY" in name or "unable to open" in low:
        return NotWritableError(
            f"response cache {path} is not writable ({doing}: {text}): use --llm-cache-mode ro to "
            "replay it, or --llm-cache PATH for a writable copy"
        )
    if "malformed" in low or "not a database" in low or "CORRUPT" in name or "NOTADB" in name:
        return CacheCorruptError(f"{path} is not a readable cm_gym response cache ({doing}): {text}")
    return CacheError(f"response cache {path} failed ({doing}): {text}")


def retrying(fn: Callable[[], T], path: Path | None, doing: str) -> T:
    """Run `fn`; a busy/locked database is retried `LOCK_RETRIES` times (each attempt already
    waited the busy timeout); any SQLite failure becomes one clear `CacheError`."""
    for attempt in range(LOCK_RETRIES + 1):
        try:
            return fn()
        except sqlite3.Error as exc:
            error = _sqlite_error(exc, path, doing)
            if isinstance(error, CacheLockedError) and attempt < LOCK_RETRIES:
                logger.info("response cache %s busy while %s; retry %d", path, doing, attempt + 1)
                time.sleep(0.05 * (attempt + 1))
                continue
            raise error from exc
    raise AssertionError("unreachable")  # pragma: no cover


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is still open (SQLite may already have rolled back)."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # pragma: no cover - nothing more can be done
            logger.debug("rollback failed", exc_info=True)


class CacheFile:
    """Opens one cache file: `conn`, whether it is `writable`, and whether rows carry requests."""

    def __init__(self, path: Path, mode: str, busy_timeout_s: float, synchronous: str, verify: bool) -> None:
        self.path, self.mode, self.busy_timeout_s = path, mode, busy_timeout_s
        self._synchronous = synchronous
        self.writable = False
        self.has_request = True
        try:
            self.conn = self._open(verify)
        except sqlite3.Error as exc:
            raise _sqlite_error(exc, self.path, "opening") from exc

    def _retrying(self, fn: Callable[[], T], doing: str) -> T:
        return retrying(fn, self.path, doing)

    # -- opening --------------------------------------------------------------------------------
    def _open(self, verify: bool) -> sqlite3.Connection:
        assert self.path is not None
        exists = inspect_cache_file(self.path)
        if self.mode == "ro":
            if not exists:
                raise CacheError(
                    f"read-only cache {self.path} does not exist: fill it first (`cm-gym tabulate`, or "
                    "a run with --llm-cache-mode rw)"
                )
            conn = self._connect_ro()
        else:
            conn = self._connect_rw(exists)
        try:
            if verify and self.path.stat().st_size <= VERIFY_MAX_BYTES:
                result = conn.execute("PRAGMA quick_check").fetchone()
                if not result or result[0] != "ok":
                    raise CacheCorruptError(f"{self.path} failed SQLite's integrity check: {result}")
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_rw(self, exists: bool) -> sqlite3.Connection:
        """A writable connection; an existing cache that cannot be written (read-only file or
        folder) is opened read-only instead: replays work, new replies are not stored."""
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.OperationalError) as exc:
            if not exists:
                raise CacheWriteError(
                    f"cannot create response cache {self.path}: {exc} (use --llm-cache PATH in a "
                    "writable folder, or --llm-cache-mode off)"
                ) from exc
            return self._degrade(exc)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self._retrying(lambda: self._prepare_rw(conn), "opening for writing")
        except NotWritableError as exc:
            conn.close()
            if not exists:
                raise
            return self._degrade(exc)
        except BaseException:
            conn.close()
            raise
        self.writable = True
        return conn

    def _degrade(self, reason: BaseException) -> sqlite3.Connection:
        logger.warning(
            "response cache %s is not writable (%s): replaying its replies, new ones are not stored "
            "(use --llm-cache PATH in a writable folder to keep them)",
            self.path,
            reason,
        )
        return self._connect_ro()

    def _prepare_rw(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = None
        if "meta" in tables:
            version = dict(conn.execute("SELECT key, value FROM meta").fetchall()).get("version")
        if tables and (version != "1" or "responses" not in tables):
            return  # current schema, or not a cache at all (refused by _check_schema)
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                conn.execute(
                    "CREATE TABLE responses (key TEXT PRIMARY KEY, template TEXT NOT NULL, "
                    "value TEXT NOT NULL, created REAL NOT NULL, request BLOB)"
                )
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("schema", SCHEMA_NAME), ("version", SCHEMA_VERSION)],
                )
            elif "responses" in tables:
                columns = {r[1] for r in conn.execute("PRAGMA table_info(responses)")}
                if "request" not in columns:  # v1 -> v2: rows gain their (optional) request
                    conn.execute("ALTER TABLE responses ADD COLUMN request BLOB")
                conn.execute("UPDATE meta SET value = ? WHERE key = 'version'", (SCHEMA_VERSION,))
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise

    def _connect_ro(self) -> sqlite3.Connection:
        """Read-only connection. A WAL file in a read-only folder without its -shm file cannot be
        opened normally; it is then opened as immutable (nobody can be writing to it there)."""
        assert self.path is not None
        base = f"{_uri(self.path)}?mode=ro"
        for uri in (base, base + "&immutable=1"):
            conn: sqlite3.Connection | None = None
            try:
                conn = sqlite3.connect(
                    uri, uri=True, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
                )
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.OperationalError as exc:
                if conn is not None:
                    conn.close()
                if "unable to open" not in str(exc) or "immutable" in uri:
                    raise
                logger.info("opening %s as immutable (read-only folder): %s", self.path, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
        if meta.get("schema") != SCHEMA_NAME or "responses" not in tables:
            raise CacheCorruptError(f"{self.path} is an SQLite file but not a cm_gym response cache")
        if meta.get("version") not in _READABLE_VERSIONS:
            raise CacheCorruptError(
                f"{self.path} is a cm_gym response cache of schema v{meta.get('version')}, this "
                f"cm_gym reads v{' and v'.join(_READABLE_VERSIONS)}"
            )
        self.has_request = "request" in {r[1] for r in conn.execute("PRAGMA table_info(responses)")}


def _uri(path: Path) -> str:
    """An SQLite ``file:`` URI for `path` (``?``, ``#`` and ``%`` in a name escaped)."""
    return "file:" + urllib.parse.quote(str(path.resolve()))


def inspect_cache_file(path: Path) -> bool:
    """Look at `path` without writing anything (module doc): False when it does not exist or is
    empty (a new cache may be created there), True when it is a response cache; one clear
    `CacheError` for anything else — a folder, a FIFO or device, a memory snapshot, a file that
    is not SQLite, an SQLite file that is not a response cache."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CacheError(f"response cache {path} cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise CacheError(
            f"response cache {path} is a folder; name a file (e.g. {Path(path) / 'responses.sqlite'})"
        )
    if not stat.S_ISREG(info.st_mode):
        raise CacheError(f"response cache {path} is not a regular file (a FIFO, device or socket is refused)")
    if info.st_size == 0:
        return False
    with open(path, "rb") as fh:
        header = fh.read(100)
    if header[:16] != _SQLITE_MAGIC:
        raise CacheCorruptError(
            f"{path} is not an SQLite file (a cm_gym response cache is); it was not changed"
        )
    if Path(f"{path}.manifest.json").exists() or Path(f"{Path(path).resolve()}.manifest.json").exists():
        raise CacheCorruptError(
            f"{path} is a frozen memory snapshot (it has a manifest), not a response cache; it was not "
            "changed: pass --llm-cache a response cache file"
        )
    wal_mode = len(header) > 18 and header[18] == 2
    try:
        tables, meta = _read_meta(f"{_uri(path)}?mode=ro&immutable=1")
    except sqlite3.Error as exc:
        if not wal_mode:
            raise CacheCorruptError(
                f"{path} is not a readable SQLite database ({exc}); it was not changed"
            ) from None
        tables, meta = set(), {}  # a live writer's checkpoint may have moved pages under the look
    if not tables and wal_mode:
        # A WAL database (never a snapshot: those keep a rollback journal) whose tables are all
        # still in its -wal file. With the -shm index there, a plain read-only look sees them and
        # creates nothing; without it (or when the log needs recovery) the writable open decides,
        # refusing anything that is not a response cache before writing a row.
        if not Path(f"{path}-shm").exists():
            return True
        try:
            tables, meta = _read_meta(f"{_uri(path)}?mode=ro")
        except sqlite3.Error:
            return True
    if not tables:
        # An SQLite database without a single table holds nothing to lose: another process has
        # just created it and not yet committed the cache's tables (it does so in one
        # transaction). The writable open creates them, or finds them, under its write lock.
        return True
    if not {"meta", "responses"} <= tables or meta.get("schema") != SCHEMA_NAME:
        raise CacheCorruptError(
            f"{path} is an SQLite file but not a cm_gym response cache (a memory store?); it was not changed"
        )
    return True


def _read_meta(uri: str) -> tuple[set[str], dict[str, str]]:
    """The table names of the database at `uri`, and its ``meta`` table (empty without one)."""
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            return tables, {}
        return tables, {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta LIMIT 100")}
    finally:
        conn.close()
