"""A persistent memo of pure work, shared by every process that uses one cache folder.

Why: a fresh process (a new training run, each worker of a vector env, each seed of a sweep)
redoes the same deterministic work on the same texts — the SQL edits of a draft, the contrast a
record encodes, where a record applies, the embedding of a state text. In-process memos make a
long run fast, but the first thousands of decisions of every process pay for it again (issue 35:
most of a fresh env's CPU over its first 2,000 decisions). `WorkMemo` keeps those results in one
SQLite file per kind of work under ``$CM_GYM_CACHE/work/``, so that only the first process on a
machine does the work.

Contract:
- only *pure* functions of their key may be memoised, and `version` must change whenever the
  result could: callers put the digest of the code that computes it and the versions of the
  libraries it calls in it (the file name carries it; a file of another version is never read);
- values are bytes or text, written by the caller's encoder and read back by its decoder; a value
  the decoder refuses is a miss (`get` never raises);
- writes are batched: `FLUSH_EVERY` entries, or the first write `FLUSH_SECONDS` after the last
  batch, and at interpreter exit; a process killed before its flush
  only loses work that will be done again. ``INSERT OR IGNORE``: the first writer wins, and any
  writer writes the same value;
- a cache file that cannot be opened, is not a work memo, or fails a read or a write turns the
  memo off for this process with one warning; the file is never changed or deleted. A read-only
  cache folder is read and not written;
- a file that was empty when a process opened it is only written by that process, never read:
  nothing an earlier process left can be in it, and a miss costs a lookup (the first process on
  a machine, the costliest, pays no lookups; what concurrent processes write meanwhile is missed);
- ``CM_GYM_WORK_MEMO=0`` turns every memo off (benchmarks of cold work do);
- a process that uses a memo file marks it: it sets the time of the file's *use marker*
  (``.<file>.use`` beside it) to now and holds a shared ``flock`` on it while the file is open, so
  `cm_gym.core.workmemo_files` can tell when a file was last used (a file of an older code
  version stops being used) and never removes one a live process has open;
- the file stops growing at `MAX_ROWS` entries;
- a file up to `PRELOAD_BYTES` is read whole when a process opens it (one scan, about 10 ms for
  the 7 MB embedding memo of SQL-v0), and `get` answers from that copy: a point lookup cost
  40-56 us (the lock, the WAL read lock, the statement) and a warm SQL-v0 process made 5,700 of
  them per 2,000 decisions, a fifth of its CPU. A key the copy lacks is still looked up in the
  file (another process may have written it since); a larger file is only looked up.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import hashlib
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from cm_gym.core.paths import cache_root

logger = logging.getLogger(__name__)

FORMAT = "cm_gym.workmemo/1"
#: entries per write transaction. A transaction costs far more than the rows it adds (the lock, the
#: log, the index pages the random keys touch): at 64 the writes took 5-6% of a cold SQL-v0 process's
#: first 2,000 decisions (issue 35); at 1,024 a few hundred kilobytes wait in memory
FLUSH_EVERY = 1024
#: a batch is also written at the first write this many seconds after the last one, so that other
#: processes (a vector env's workers) see a slow process's work
FLUSH_SECONDS = 30.0
MAX_ROWS = 2_000_000
#: files up to this size (with their write-ahead log) are read whole when opened (module doc)
PRELOAD_BYTES = 64 << 20
ENV_SWITCH = "CM_GYM_WORK_MEMO"
#: how long opening a memo waits for `workmemo_files.clear_work` to finish removing its file
MARK_WAIT_S = 2.0

try:  # POSIX; elsewhere files are not marked (and `clear_work` cannot tell a file in use)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")
_LIVE: weakref.WeakSet[WorkMemo] = weakref.WeakSet()


def enabled() -> bool:
    """False when ``CM_GYM_WORK_MEMO`` is 0 / off / false / no (read on every call: cheap)."""
    raw = _getenv(ENV_SWITCH)
    return raw is None or _switch(raw)


def _getenv(name: str) -> str | None:
    """``os.environ.get(name)``, read from the mapping's own dict when it has one (CPython's
    ``os.environ._data``): `get` of a variable that is not set raises and catches a KeyError
    inside `Mapping.get` (2.2 us; 0.5 us here, with the name's encoded key kept), and every memo
    lookup reads two variables that are usually unset. Any other mapping (another Python, a replaced ``os.environ``) is asked
    the ordinary way."""
    environ = os.environ
    data = getattr(environ, "_data", None)
    if type(data) is not dict or not hasattr(environ, "encodekey"):
        return environ.get(name)
    encoded = _encoded_names.get(name)
    if encoded is None or encoded[0] is not environ:  # the name's key in this mapping, kept
        encoded = _encoded_names[name] = (environ, environ.encodekey(name))
    raw = data.get(encoded[1])
    return None if raw is None else environ.decodevalue(raw)


_encoded_names: dict[str, tuple[object, object]] = {}


@functools.lru_cache(maxsize=8)
def _switch(raw: str) -> bool:
    return raw.strip().lower() not in ("0", "off", "false", "no")


def memo_key(*parts: str) -> bytes:
    """A 16-byte digest of the parts (separated so that ("ab", "c") and ("a", "bc") differ): each
    part's UTF-8 length (8 bytes, little-endian), then the part, hashed in one call."""
    data = [part.encode("utf-8", "surrogatepass") for part in parts]
    return hashlib.blake2b(
        b"".join([len(d).to_bytes(8, "little") + d for d in data]), digest_size=16
    ).digest()


def library_versions(*dists: str) -> str:
    """``"<dist><version>-..."`` of installed distributions ("none" when one is missing): the
    part of a memo's version that names the libraries its work calls."""
    out = []
    for dist in dists:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "none"
        out.append(f"{dist}{version}")
    return "-".join(out)


class WorkMemo:
    """Values by key in ``$CM_GYM_CACHE/work/<name>-<version>.sqlite`` (module doc)."""

    def __init__(self, name: str, version: str) -> None:
        self.name = name
        self.file_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{name}-{version}")[:120]
        self._root: str | None = None  # the $CM_GYM_CACHE the open connection belongs to
        self.hits = self.misses = 0
        self._pending: dict[bytes, bytes | str] = {}
        self._flushed_at = time.monotonic()  # when the last batch was written (or the memo made)
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._off = False
        self._writable = True
        self._write_only = False  # the file was empty when this process opened it (module doc)
        self._loaded: dict[bytes, bytes | str] = {}  # the file's entries when opened (module doc)
        self._lock = threading.Lock()
        self._marker: int | None = None  # the open use marker's descriptor (module doc)
        _LIVE.add(self)

    # -- the file ----------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The memo's file in the current cache folder."""
        return cache_root() / "work" / f"{self.file_name}.sqlite"

    def _connection(self) -> sqlite3.Connection | None:
        if self._off or not enabled():
            return None
        root = _getenv("CM_GYM_CACHE")
        if self._pid != os.getpid() or root != self._root:  # first use, a forked child, another cache
            if self._conn is not None and self._pid == os.getpid():
                self._flush_to(self._conn)
                self._conn.close()
            self._drop_marker()
            self._conn, self._pid, self._root, self._loaded = None, os.getpid(), root, {}
            try:
                self._conn = self._open()
            except (sqlite3.Error, OSError) as exc:
                self._disable(f"cannot be used ({exc})")
        return self._conn

    def _drop_marker(self) -> None:
        """Close the use marker this object holds. Only a close: a forked child's copy shares the
        parent's lock, which ``LOCK_UN`` would release for the parent too."""
        if self._marker is not None:
            with contextlib.suppress(OSError):
                os.close(self._marker)
            self._marker = None

    def _open(self) -> sqlite3.Connection:
        if not self.path.parent.is_dir():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._marker = mark_use(self.path)  # before the file opens: `clear_work` cannot remove it between
        self._writable = os.access(self.path.parent, os.W_OK) and (
            not self.path.exists() or os.access(self.path, os.W_OK)
        )
        if not self._writable and not self.path.exists():
            raise OSError("the cache folder is read-only and holds no memo")
        uri = self.path.resolve().as_uri() + ("" if self._writable else "?mode=ro")
        conn = sqlite3.connect(uri, uri=True, timeout=10.0, check_same_thread=False, isolation_level=None)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables and self._writable:  # a new file: ours to lay out (one writer does)
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
                conn.execute("CREATE TABLE IF NOT EXISTS memo (key BLOB PRIMARY KEY, value BLOB NOT NULL)")
                conn.execute("COMMIT")
            elif not {"meta", "memo"} <= tables:  # somebody else's file: never written
                raise sqlite3.DatabaseError(f"not a {FORMAT} file")
            row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != FORMAT:
                raise sqlite3.DatabaseError(f"not a {FORMAT} file")
            if self._writable:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            top = conn.execute("SELECT max(rowid) FROM memo").fetchone()[0] or 0
            if top >= MAX_ROWS:
                self._writable = False
            self._write_only = top == 0
            if not self._write_only and self._file_bytes() <= PRELOAD_BYTES:
                self._loaded = dict(conn.execute("SELECT key, value FROM memo"))
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _file_bytes(self) -> int:
        """The size of the memo file and of its write-ahead log."""
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    def _disable(self, why: str) -> None:
        if not self._off:
            logger.warning("work memo %s %s; working without it in this process", self.path, why)
        self._off = True
        self._pending.clear()
        self._loaded = {}
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        self._drop_marker()

    # -- use ---------------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | str | None:
        """The stored value, or None (a miss, or the memo is off)."""
        with self._lock:
            found = self._pending.get(key)
            if found is None:
                conn = self._connection()
                found = self._loaded.get(key) if conn is not None else None
                if found is None and conn is not None and not self._write_only:
                    try:
                        row = conn.execute("SELECT value FROM memo WHERE key = ?", (key,)).fetchone()
                    except sqlite3.Error as exc:
                        self._disable(f"could not be read ({exc})")
                        row = None
                    found = row[0] if row is not None else None
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
            return found

    def put(self, key: bytes, value: bytes | str) -> None:
        """Keep a value (written with the next batch)."""
        with self._lock:
            if self._off or not self._writable:
                return
            self._pending[key] = value
            if len(self._pending) >= FLUSH_EVERY or time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self._flush()

    def flush(self) -> None:
        """Write what is pending (also at interpreter exit)."""
        with self._lock:
            self._flush()

    def close(self) -> None:
        """Write what is pending and close the file; the next use opens it again (and reads
        what other processes wrote, even if it was empty before)."""
        with self._lock:
            self._flush()
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._drop_marker()
            self._conn, self._pid = None, -1

    def _flush(self) -> None:
        if not self._pending:
            return
        conn = self._connection()
        if conn is None or not self._writable:
            self._pending.clear()
            return
        self._flush_to(conn)

    def _flush_to(self, conn: sqlite3.Connection) -> None:
        if not self._pending or not self._writable:
            self._pending.clear()
            return
        items = list(self._pending.items())
        self._pending.clear()
        self._flushed_at = time.monotonic()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT OR IGNORE INTO memo VALUES (?, ?)", items)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._disable(f"could not be written ({exc})")

    def cached(self, key: bytes, compute: Callable[[], T], encode: Callable[[T], bytes | str],
               decode: Callable[[bytes | str], T]) -> T:  # fmt: skip
        """`compute()` through the memo: the stored value decoded, else computed and stored. A
        stored value `decode` refuses (any exception) is recomputed."""
        if not enabled():
            return compute()
        found = self.get(key)
        if found is not None:
            try:
                return decode(found)
            except Exception:  # noqa: BLE001 - a value we cannot read is a miss
                logger.debug("work memo %s: undecodable value; recomputed", self.name)
        value = compute()
        self.put(key, encode(value))
        return value


def marker_path(path: Path) -> Path:
    """The use marker of the memo file `path` (module doc)."""
    return path.with_name(f".{path.name}.use")


def mark_use(path: Path) -> int | None:
    """Set the time of `path`'s use marker to now and take a shared lock on it; the descriptor
    to keep open while the file is in use (None where nothing could be marked: a read-only
    folder, no ``flock``). While `workmemo_files.clear_work` holds the marker (it is removing the
    file) this waits, up to `MARK_WAIT_S`, and then marks the marker created anew; past that it
    goes on unmarked: the memo only ever loses work it can redo."""
    if fcntl is None:
        return None
    marker = marker_path(path)
    deadline = time.monotonic() + MARK_WAIT_S
    while True:
        try:
            fd = os.open(marker, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None  # a read-only cache: used, not marked
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(marker).st_ino:  # not a marker removed meanwhile
                with contextlib.suppress(OSError):
                    os.utime(fd)
                return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK, errno.ENOENT):
                os.close(fd)
                return None
        os.close(fd)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


@atexit.register
def _flush_all() -> None:
    for memo in list(_LIVE):
        if memo._pid == os.getpid():
            memo.flush()
