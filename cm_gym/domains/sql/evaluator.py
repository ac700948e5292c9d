"""The SQL world model H: run a query in a sandbox and compare its result with the reference.

Sandbox, in layers: (1) the database is opened read-only (``mode=ro``; ``immutable=1`` for files
that are not ours), so the file cannot change; (2) only one statement that starts with SELECT,
WITH, VALUES or "(" is run; (3) an authorizer allows only reads, SELECTs, recursive CTEs and
non-dangerous functions — writes, ATTACH/DETACH, PRAGMA, transactions, schema changes and
``load_extension``/file functions are denied; (4) a progress handler stops a query once its time
budget (default 2 s) is spent; (5) at most `row_cap` rows are fetched and strings/blobs are capped
at 1 MB. Every refusal or failure is an `Outcome` with score 0, a status and a reason.

Reference results are computed once per (database, reference query) and kept in memory; one
read-only connection per database file is reused.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cm_gym.domains.sql.compare import Comparison, Result, compare
from cm_gym.domains.sql.schema import ro_uri
from cm_gym.types import TRUNCATION, Action, AgentState, Outcome, truncate

logger = logging.getLogger(__name__)

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33}  # 33: RECURSIVE
_DENIED_FUNCTIONS = {
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_dbpage",
    "zipfile", "sqlar_compress", "sqlar_uncompress",
}  # fmt: skip
_ACTION_NAMES = {
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
_START = re.compile(r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(select|with|values|\()", re.I | re.S)
_WRITE = re.compile(
    r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(drop|insert|update|delete|create|alter|attach|detach|pragma|vacuum|"
    r"begin|commit|end|rollback|savepoint|release|replace|reindex|analyze|explain|upsert)\b",
    re.I | re.S,
)
_ORDER_BY = re.compile(r"\border\s+by\b", re.I)
MAX_QUERY_CHARS = 20_000
MAX_VALUE_BYTES = 1_000_000


@dataclass(frozen=True)
class _Reference:
    result: Result | None
    ordered: bool
    error: str = ""
    solved: Outcome | None = None  # the shared Outcome of a result equal to this one (read-only)


class _Sandbox:
    """One read-only connection with the authorizer, limits and a resettable time budget."""

    def __init__(self, path: str, immutable: bool, progress_steps: int) -> None:
        self.deadline = float("inf")
        self.denied = ""
        self.conn = sqlite3.connect(ro_uri(path, immutable=immutable), uri=True, check_same_thread=False)
        self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        for limit, value in (
            ("SQLITE_LIMIT_ATTACHED", 0),
            ("SQLITE_LIMIT_LENGTH", MAX_VALUE_BYTES),
            ("SQLITE_LIMIT_SQL_LENGTH", MAX_QUERY_CHARS * 4),
        ):
            if hasattr(sqlite3, limit) and hasattr(self.conn, "setlimit"):
                self.conn.setlimit(getattr(sqlite3, limit), value)
        self.conn.set_authorizer(self._authorize)
        self.conn.set_progress_handler(self._progress, progress_steps)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if action in _ALLOWED:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
                self.denied = f"function {arg2}() is not allowed"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        name = _ACTION_NAMES.get(action, str(action))
        self.denied = f"{name}{' on ' + arg1 if arg1 else ''} is not allowed (read-only sandbox)"
        return sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        return 1 if time.perf_counter() > self.deadline else 0

    def close(self) -> None:
        self.conn.close()


class SQLEvaluator:
    """Execution-accuracy checker for SQL tasks (`Task.meta["db_path"]`, `Task.reference`).

    `check` scores 1.0 / 0.0 (or partial credit with ``partial_credit=True``, see
    `cm_gym.domains.sql.compare`); it never raises on a bad action and never mutates the state.
    Statuses: "ok" (checked; right or wrong), "error" (empty, not SQL, several statements, SQL
    error, missing/corrupt database, broken reference), "refused" (a write or other denied
    operation), "timeout" (`budget_s` spent), "budget" (more than `row_cap` rows).
    One instance is meant for one thread (vector envs in subprocesses each get a pickled copy,
    which reopens its connections).
    """

    def __init__(
        self,
        *,
        budget_s: float = 2.0,
        row_cap: int = 10_000,
        partial_credit: bool = False,
        digits: int = 10,
        progress_steps: int = 1000,
    ) -> None:
        self.budget_s, self.row_cap, self.partial_credit = budget_s, row_cap, partial_credit
        self.digits, self.progress_steps = digits, progress_steps
        self._sandboxes: dict[tuple[str, bool], _Sandbox] = {}
        self._references: dict[tuple[str, str], _Reference] = {}

    # -- pickling (vector envs in subprocesses): connections are reopened on demand ---------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sandboxes"] = {}
        return state

    def close(self) -> None:
        """Close every open connection (they reopen on the next check)."""
        for box in self._sandboxes.values():
            box.close()
        self._sandboxes.clear()

    # -- execution ---------------------------------------------------------------------------
    def _sandbox(self, path: str, immutable: bool) -> _Sandbox:
        key = (path, immutable)
        box = self._sandboxes.get(key)
        if box is None:
            box = _Sandbox(path, immutable, self.progress_steps)
            self._sandboxes[key] = box
        return box

    def run(self, path: str, sql: str, *, immutable: bool = True) -> tuple[Result | None, str, str]:
        """Execute `sql` in the sandbox: (result, status, reason); status "ok" when it ran."""
        sql = sql.strip()
        if sql.endswith(";"):
            sql = sql.rstrip("; \t\r\n")
        if not sql:
            return None, "error", "empty query"
        if len(sql) > MAX_QUERY_CHARS:
            return None, "refused", f"query longer than {MAX_QUERY_CHARS} characters"
        if not _START.match(sql):
            if _WRITE.match(sql):
                return None, "refused", "only a single SELECT (or WITH ... SELECT) query is allowed"
            return None, "error", "not a SQL query: expected one SELECT (or WITH ... SELECT) statement"
        box = self._sandboxes.get((path, immutable))
        if box is None:
            if not Path(path).is_file():
                return None, "error", f"database file not found: {path}"
            try:
                box = self._sandbox(path, immutable)
            except sqlite3.DatabaseError as err:
                return None, "error", f"cannot open database {path}: {err}"
        box.denied = ""
        box.deadline = time.perf_counter() + self.budget_s  # each run sets its own budget
        try:
            cursor = box.conn.execute(sql)
            rows = cursor.fetchmany(self.row_cap + 1)
            description = cursor.description
        except sqlite3.OperationalError as err:
            return None, *self._classify(box, err, path)
        except (sqlite3.ProgrammingError, sqlite3.Warning) as err:
            msg = str(err)
            if "one statement" in msg:
                return None, "error", "several statements: submit exactly one SQL query"
            return None, "error", f"SQL error: {msg}"
        except sqlite3.DatabaseError as err:
            if box.denied:
                return None, "refused", box.denied
            return None, "error", f"SQL error: {err}"
        except (UnicodeError, ValueError, OverflowError, MemoryError) as err:
            return None, "error", f"invalid query text: {err}"
        if len(rows) > self.row_cap:
            return None, "budget", f"the result has more than {self.row_cap} rows (row cap)"
        return Result(rows, len(description) if description else 0, self.digits), "ok", ""

    def _classify(self, box: _Sandbox, err: sqlite3.OperationalError, path: str) -> tuple[str, str]:
        msg = str(err)
        if box.denied or "not authorized" in msg:
            return "refused", box.denied or msg
        if "interrupted" in msg:
            return "timeout", f"the query ran longer than its {self.budget_s:g} s budget"
        if "decode" in msg and box.conn.text_factory is str:
            box.conn.text_factory = lambda b: b.decode("utf-8", "replace")
            return "retry", msg
        if "readonly" in msg:
            return "refused", "the database is read-only"
        return "error", f"SQL error: {msg}"

    def _run_retrying(self, path: str, sql: str, immutable: bool) -> tuple[Result | None, str, str]:
        result, status, reason = self.run(path, sql, immutable=immutable)
        if status == "retry":  # undecodable text in the database: rerun with lenient decoding
            result, status, reason = self.run(path, sql, immutable=immutable)
        return result, status, reason

    def reference(self, path: str, sql: str, *, immutable: bool = True) -> _Reference:
        """The (cached) reference result of a task."""
        key = (path, sql)
        ref = self._references.get(key)
        if ref is None:
            result, status, reason = self._run_retrying(path, sql, immutable)
            ordered = _has_top_level_order(sql)
            solved = _outcome(result, result, ordered, None, False) if result is not None else None
            ref = _Reference(result, ordered, "" if status == "ok" else f"{status}: {reason}", solved)
            if ref.error:
                logger.warning("reference query failed on %s: %s", path, ref.error)
            self._references[key] = ref
        return ref

    # -- the world model ---------------------------------------------------------------------
    def check(self, state: AgentState, action: Action | str) -> Outcome:
        """Evaluate `action` against the task's reference result (never raises)."""
        task = state.task
        sql = action.text if isinstance(action, Action) else str(action)
        meta = task.meta or {}
        path = meta.get("db_path") or ""
        immutable = meta.get("immutable", True) is not False
        if not path:
            return _fail("error", f"task {task.task_id} names no database (meta['db_path'])")
        if not task.reference or task.reference.isspace():
            return _fail("error", f"task {task.task_id} has no reference query to compare with")
        try:
            ref = self._references.get((path, task.reference)) or self.reference(
                path, task.reference, immutable=immutable
            )
        except Exception as err:  # noqa: BLE001 - a broken task must not kill the batch
            logger.exception("reference evaluation crashed for %s", task.task_id)
            return _fail("error", f"reference evaluation failed: {err}")
        if ref.result is None:
            return _fail("error", f"the task's reference query cannot be evaluated ({ref.error})")
        try:
            result, status, reason = self._run_retrying(path, sql, immutable)
        except Exception as err:  # noqa: BLE001
            logger.exception("sandbox crashed on %s", task.task_id)
            return _fail("error", f"evaluation failed: {err}")
        if result is None:
            return _fail(status, reason)
        expected = ref.result
        if result.ncols == expected.ncols and result.rows == expected.rows and ref.solved is not None:
            return ref.solved  # fast path: identical rows (the common case for a right answer)
        cmp = compare(result, expected, ordered=ref.ordered)
        return _outcome(result, expected, ref.ordered, cmp, self.partial_credit)


def _outcome(
    result: Result, expected: Result, ordered: bool, cmp: Comparison | None, partial: bool
) -> Outcome:
    """The scored Outcome (`cmp` None means "equal to the reference")."""
    details = {
        "rows": len(result.rows),
        "cols": result.ncols,
        "expected_rows": len(expected.rows),
        "expected_cols": expected.ncols,
        "ordered": ordered,
    }
    shape = f"{len(result.rows)} row(s) x {result.ncols} column(s)"
    if cmp is None or cmp.correct:
        return Outcome(
            1.0, True, f"Correct: the query returns the expected result ({shape}).", details=details
        )
    feedback = (
        f"Wrong result: the query returned {shape}; the expected result has "
        f"{len(expected.rows)} row(s) x {expected.ncols} column(s)."
    )
    if cmp.hint:
        feedback += f" Hint: {cmp.hint}."
    score = cmp.partial if partial else 0.0
    return Outcome(
        score, False, truncate(feedback, TRUNCATION["feedback"]), reason="wrong result", details=details
    )


def _fail(status: str, reason: str) -> Outcome:
    label = {"refused": "Refused", "timeout": "Timeout", "budget": "Limit exceeded"}.get(status, "Error")
    return Outcome(
        0.0, False, truncate(f"{label}: {reason}", TRUNCATION["feedback"]), status=status, reason=reason
    )


def _has_top_level_order(sql: str) -> bool:
    """Whether the outermost query sorts (parsed only when ORDER BY occurs at all)."""
    if not _ORDER_BY.search(sql):
        return False
    from cm_gym.domains.sql import sqlast

    try:
        return sqlast.has_top_level_order(sqlast.parse(sql))
    except sqlast.SQLParseError:
        return True
