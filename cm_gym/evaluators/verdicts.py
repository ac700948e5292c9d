"""A persistent cache of a world model's verdicts by content hash, so builds and RL training do
not re-run an expensive checker (``coqc``, ``dafny``) on an action it has already checked.

Key: sha256 of whatever identifies the verdict (`verdict_key`: checker version, tool version,
the task's text, the action, the limits). Value: JSON (the `Outcome` fields, `outcome_to_json`).
Callers store only the tool's own verdicts, never a run the sandbox killed (it may not repeat).
The SQLite file (WAL, busy timeout, one transaction per write) may be shared by processes; its
`schema` names the checker, so one checker's file is never read as another's. A file that is
unreadable or not this cache is left untouched: the cache logs a warning and keeps verdicts in
memory only for this process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cm_gym.core.types import Outcome

logger = logging.getLogger(__name__)

_MEMORY_LIMIT = 100_000


def verdict_key(parts: Mapping[str, Any]) -> str:
    """The sha256 of `parts` as canonical JSON."""
    blob = json.dumps(dict(parts), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class VerdictCache:
    """Verdicts by key: an in-process dict in front of an optional SQLite file (None = memory only)."""

    def __init__(self, path: str | Path | None, *, schema: str, what: str = "verdict cache") -> None:
        self.path = Path(path) if path is not None else None
        self.schema, self.what = schema, what
        self.hits = self.misses = 0
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if self.path is not None:
            try:
                self._conn = self._open(self.path)
            except sqlite3.Error as exc:
                logger.warning(
                    "%s %s is unusable (%s); keeping verdicts in memory only", what, self.path, exc
                )
                self._conn = None

    def _open(self, path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (self.schema,))
            elif row[0] != self.schema:
                raise sqlite3.DatabaseError(f"not a {self.schema} file (schema {row[0]!r})")
            conn.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored verdict, or None."""
        with self._lock:
            found = self._memory.get(key)
            if found is None and self._conn is not None:
                try:
                    row = self._conn.execute("SELECT value FROM verdicts WHERE key = ?", (key,)).fetchone()
                except sqlite3.Error as exc:
                    logger.warning("%s read failed (%s); treating as a miss", self.what, exc)
                    row = None
                if row is not None:
                    found = json.loads(row[0])
                    self._remember(key, found)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
            return found

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store a verdict (first writer wins; a failed write is logged, never raised)."""
        data = dict(value)
        with self._lock:
            self._remember(key, data)
            if self._conn is None:
                return
            try:
                self._conn.execute(
                    "INSERT OR IGNORE INTO verdicts VALUES (?, ?)", (key, json.dumps(data, sort_keys=True))
                )
            except sqlite3.Error as exc:
                logger.warning("%s write failed (%s); kept in memory", self.what, exc)

    def _remember(self, key: str, value: dict[str, Any]) -> None:
        if len(self._memory) >= _MEMORY_LIMIT:
            self._memory.clear()
        self._memory[key] = value

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def outcome_to_json(o: Outcome) -> dict[str, Any]:
    """An `Outcome`'s fields as a JSON-serialisable dict (what the cache stores)."""
    return {"score": o.score, "solved": o.solved, "feedback": o.feedback, "status": o.status,
            "reason": o.reason, "details": dict(o.details)}  # fmt: skip


def outcome_from_json(d: Mapping[str, Any], *, cached_hit: bool) -> Outcome:
    """The `Outcome` stored by `outcome_to_json`; ``details["cached"]`` says whether it was a hit."""
    details = dict(d.get("details", {}))
    details["cached"] = cached_hit
    return Outcome(float(d["score"]), bool(d["solved"]), str(d.get("feedback", "")), str(d.get("status", "ok")),
                   str(d.get("reason", "")), details)  # fmt: skip
