"""The SQLite side of the SQL world model: one sandboxed read-only connection per database and the
execution of one query on it. Light imports only, so that the same code runs in the evaluator's
process (bounded queries) and in its killable worker process (everything else), where it is
imported without the package's ``__init__`` (see `cm_gym.evaluators.worker`).

Sandbox, in layers: the file is opened read-only (``mode=ro``; ``immutable=1`` for files that
are not ours); an authorizer allows only reads, SELECTs, recursive CTEs and functions that touch
no files; a progress handler, called every `progress_steps` virtual-machine instructions,
counts them and stops the query once its *step budget* is spent (status "budget": the same count
on every machine, whatever its load) or, far later, once its wall-clock *hang guard* has passed
(status "infrastructure": the machine, not the query); SQLite's length limit caps every value at
1 MB and the LIKE pattern length at 1,000; at most `row_cap` rows are fetched and their text/blob
bytes are counted against `max_bytes`. A run reports the steps it used (a multiple of
`progress_steps`).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from cm_gym.domains.sql.schema import ro_uri

ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33}  # 33: RECURSIVE
DENIED_FUNCTIONS = {
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_dbpage",
    "zipfile", "sqlar_compress", "sqlar_uncompress",
}  # fmt: skip
ACTION_NAMES = {
    getattr(sqlite3, "SQLITE_" + n, -1): n
    for n in (
        "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE",
        "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER",
        "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA", "TRANSACTION",
        "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE",
        "DROP_VTABLE", "SAVEPOINT", "COPY",
    )
}  # fmt: skip
MAX_QUERY_CHARS = 20_000
MAX_VALUE_BYTES = 1_000_000
MAX_LIKE_PATTERN = 1_000
CHUNK_ROWS = 512
#: how many virtual-machine instructions pass between two calls of the progress handler: the
#: granularity of the step count. A query is stopped at most this many steps past its budget (0.01%
#: of the default 100,000,000) and reports its steps rounded down to a multiple of it. Each call is
#: a Python callback: a 5.4M-step query made 5,400 calls at 1,000 (under 1% of its 67 ms of CPU,
#: within noise) and 540 at 10,000; most Spider queries need fewer than 10,000 steps and now make
#: none. The count depends only on SQLite's version and the query, never on the machine (see
#: docs/budgets.md).
PROGRESS_STEPS = 10_000
ROW_OVERHEAD = 64  # bytes counted per fetched value on top of its text/blob length

Rows = list[tuple[Any, ...]]


class Box:
    """One read-only connection with the authorizer, limits, and a resettable step budget and
    hang guard (`arm`). `serial` tells connections apart; `data_version` reads SQLite's commit
    counter."""

    _serials = itertools.count(1)

    def __init__(self, path: str, immutable: bool, progress_steps: int) -> None:
        self.serial = next(Box._serials)
        self.path = path
        self.reading_version = False
        self.version_reads = 0  # times ``PRAGMA data_version`` was executed (`data_version`)
        self._quiet: tuple[tuple[Any, ...], int] | None = None  # (file stats, version) of a quiet file
        self.deadline = float("inf")
        self.progress_steps = progress_steps
        self.calls = 0
        self.max_calls: float = float("inf")
        self.stopped = ""  # "steps" | "hang" once the progress handler interrupted the query
        self.denied = ""
        self.conn = sqlite3.connect(ro_uri(path, immutable=immutable), uri=True, check_same_thread=False)
        self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        for limit, value in (
            ("SQLITE_LIMIT_ATTACHED", 0),
            ("SQLITE_LIMIT_LENGTH", MAX_VALUE_BYTES),
            ("SQLITE_LIMIT_SQL_LENGTH", MAX_QUERY_CHARS * 4),
            ("SQLITE_LIMIT_LIKE_PATTERN_LENGTH", MAX_LIKE_PATTERN),
        ):
            if hasattr(sqlite3, limit) and hasattr(self.conn, "setlimit"):
                self.conn.setlimit(getattr(sqlite3, limit), value)
        self.conn.set_authorizer(self._authorize)
        self.conn.set_progress_handler(self._progress, progress_steps)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if (
            self.reading_version
            and action == sqlite3.SQLITE_PRAGMA
            and arg1 == "data_version"
            and arg2 is None
        ):
            return sqlite3.SQLITE_OK  # only `data_version`, only while this class reads it
        if action in ALLOWED:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
                self.denied = f"function {arg2}() is not allowed"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        name = ACTION_NAMES.get(action, str(action))
        self.denied = f"{name}{' on ' + arg1 if arg1 else ''} is not allowed (read-only sandbox)"
        return sqlite3.SQLITE_DENY

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version`` on this connection: it changes whenever another
        connection commits to the file, so two equal values mean the content did not change.

        The pragma takes the file's lock (19 us, more than a third of a whole check on a small
        database). A *quiet* file skips it: when the last read found the database file, and its
        ``-wal`` file in WAL mode, last modified more than `QUIET_S` ago, the value it read is
        returned while those files' stats (inode, size, modification and change times) stay the
        same. Sound because every commit writes one of them (the database file in rollback mode,
        where a switch to WAL also rewrites its header; the ``-wal`` file in WAL mode), and a
        write sets their modification time to the present, which differs from a time that old
        on any file system's time granularity (FAT: 2 s). Only a process that sets a file's
        times back by hand, or a file server whose clock lags this machine's by more than
        `QUIET_S`, could hide a commit."""
        quiet = self._quiet
        if quiet is not None and _file_stats(self.path, quiet[0][0]) == quiet[0]:
            return quiet[1]
        self.reading_version = True
        try:
            version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        finally:
            self.reading_version = False
        self.version_reads += 1
        self._quiet = None
        wal = _in_wal_mode(self.path)
        stats = _file_stats(self.path, wal)
        if stats is not None and all(
            stat is None or stat[2] < (time.time() - QUIET_S) * 1e9 for stat in stats[1:]
        ):
            self._quiet = (stats, version)
        return version

    def arm(self, step_budget: int | None, hang_guard_s: float) -> None:
        """Reset the step count and set the next query's step budget and hang guard."""
        self.calls, self.stopped = 0, ""
        self.max_calls = step_budget // self.progress_steps if step_budget else float("inf")
        self.deadline = time.perf_counter() + hang_guard_s

    @property
    def steps(self) -> int:
        """Virtual-machine steps the last query used (counted in units of `progress_steps`)."""
        return self.calls * self.progress_steps

    def _progress(self) -> int:
        self.calls += 1
        if self.calls > self.max_calls:
            self.stopped = "steps"
            return 1
        if time.perf_counter() > self.deadline:
            self.stopped = "hang"
            return 1
        return 0

    def close(self) -> None:
        self.conn.close()


class Engine:
    """The connections of one process, by (database, immutable, progress steps)."""

    def __init__(self) -> None:
        self.boxes: dict[tuple[str, bool, int], Box] = {}

    def close(self) -> None:
        for box in self.boxes.values():
            box.close()
        self.boxes.clear()

    def box(self, path: str, immutable: bool, progress_steps: int) -> tuple[Box | None, str]:
        key = (path, immutable, progress_steps)
        box = self.boxes.get(key)
        if box is None:
            if not Path(path).is_file():
                return None, f"database file not found: {path}"
            try:
                box = Box(path, immutable, progress_steps)
            except sqlite3.DatabaseError as err:
                return None, f"cannot open database {path}: {err}"
            self.boxes[key] = box
        return box, ""

    def run(
        self,
        path: str,
        sql: str,
        immutable: bool,
        hang_guard_s: float,
        row_cap: int,
        max_bytes: int,
        progress_steps: int,
        step_budget: int | None = None,
    ) -> tuple[Rows | None, int, str, str, int]:
        """(rows, column count, status, reason, steps used) of one vetted query; status "ok" when
        it ran, else "error", "refused", "budget" (steps, rows, bytes, memory) or "infrastructure"
        (the hang guard). Retries once with lenient decoding."""
        box = self.boxes.get((path, immutable, progress_steps))
        if box is None:
            box, why = self.box(path, immutable, progress_steps)
            if box is None:
                return None, 0, "error", why, 0
        for _ in range(2):
            box.arm(step_budget, hang_guard_s)
            rows, ncols, status, reason = execute(box, sql, hang_guard_s, row_cap, max_bytes)
            if status != "retry":
                return rows, ncols, status, reason, box.calls * box.progress_steps
        return None, 0, "error", "undecodable text in the database", box.steps


#: seconds since a database file's last modification after which `Box.data_version` trusts its
#: stats (module doc of `Box.data_version`)
QUIET_S = 10.0


def settle(path: str | Path) -> None:
    """Date the modification time of a database file that no reader has opened yet (a temporary
    file about to be renamed into place) back by twice `QUIET_S`, so that `Box.data_version`
    trusts its stats from the first read on, instead of taking the file's lock on every check for
    its first `QUIET_S` seconds (all of a fresh cache's first process: issue 35). Sound for the
    same reason as the quiet rule itself: no commit can have happened to a file no reader has
    seen, and every later commit sets the time to the present, which differs from the one set
    here; a file renamed over it has another inode."""
    then = time.time_ns() - int(2 * QUIET_S * 1e9)
    os.utime(path, ns=(then, then))


def _file_stats(path: str, wal: bool | None) -> tuple[Any, ...] | None:
    """(wal, stats of the file, stats of its ``-wal`` file when `wal`) with each stats
    (inode, size, mtime ns, ctime ns) or None when missing; None when `wal` is None."""
    if wal is None:
        return None
    out: list[Any] = [wal]
    for name in (path, path + "-wal") if wal else (path,):
        try:
            st = os.stat(name)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def _in_wal_mode(path: str) -> bool | None:
    """Whether the database file's header says WAL mode (bytes 18-19 = 2); None when unreadable."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return None
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def execute(
    box: Box, sql: str, hang_guard_s: float, row_cap: int, max_bytes: int
) -> tuple[Rows | None, int, str, str]:
    """(rows, column count, status, reason) of one vetted query on an armed `box`: status "ok",
    "error", "refused", "budget", "infrastructure" or "retry" (undecodable text: the connection now
    decodes leniently, run it again). `Engine.run` arms and retries; the evaluator calls it directly
    on a connection it already has (one frame less on every check)."""
    box.denied = ""
    try:
        cursor = box.conn.execute(sql)
        description = cursor.description
        ncols = len(description) if description else 0
        small = max_bytes // MAX_VALUE_BYTES  # values: fewer than this many cannot reach max_bytes
        want = min(CHUNK_ROWS, row_cap + 1)
        rows: Rows = cursor.fetchmany(want)
        if len(rows) < want and len(rows) * max(1, ncols) <= small:
            return rows, ncols, "ok", ""  # the common case: one small chunk, nothing to count
        chunk, size = rows, 0
        while True:
            if len(rows) * max(1, ncols) > small:  # count bytes only when it could matter
                size += ROW_OVERHEAD * ncols * len(chunk)
                for row in chunk:
                    for v in row:
                        if v.__class__ is str or v.__class__ is bytes:
                            size += len(v)
                if size > max_bytes:
                    return None, 0, "budget", f"the result is larger than {max_bytes >> 20} MB"
            if len(chunk) < want or len(rows) > row_cap:
                break
            want = min(CHUNK_ROWS, row_cap + 1 - len(rows))
            chunk = cursor.fetchmany(want)
            rows.extend(chunk)
    except sqlite3.OperationalError as err:
        return (None, 0, *_classify(box, err, hang_guard_s))
    except (sqlite3.ProgrammingError, sqlite3.Warning) as err:
        msg = str(err)
        if "one statement" in msg:
            return None, 0, "error", "several statements: submit exactly one SQL query"
        return None, 0, "error", f"SQL error: {msg}"
    except sqlite3.DatabaseError as err:
        if box.denied:
            return None, 0, "refused", box.denied
        return None, 0, "error", f"SQL error: {err}"
    except MemoryError:
        return None, 0, "budget", "the query ran out of memory"
    except (UnicodeError, ValueError, OverflowError) as err:
        return None, 0, "error", f"invalid query text: {err}"
    if len(rows) > row_cap:
        return None, 0, "budget", f"the result has more than {row_cap} rows (row cap)"
    return rows, ncols, "ok", ""


def _classify(box: Box, err: sqlite3.OperationalError, hang_guard_s: float) -> tuple[str, str]:
    msg = str(err)
    if box.denied or "not authorized" in msg:
        return "refused", box.denied or msg
    if "interrupted" in msg and box.stopped == "steps":
        limit = int(box.max_calls) * box.progress_steps
        return "budget", f"the query needed more than its budget of {limit:,} SQLite virtual-machine steps"
    if "interrupted" in msg:
        return "infrastructure", f"the query ran past its wall-clock hang guard of {hang_guard_s:g} s"
    if "out of memory" in msg:
        return "budget", "the query ran out of memory"
    if "decode" in msg and box.conn.text_factory is str:
        box.conn.text_factory = _lenient
        return "retry", msg
    if "readonly" in msg:
        return "refused", "the database is read-only"
    return "error", f"SQL error: {msg}"


def _lenient(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# -- the worker's entry point (module state: one engine per worker process) -------------------
_ENGINE = Engine()


#: `Engine.run` on this process's connections (called by name in the worker)
run_query = _ENGINE.run
