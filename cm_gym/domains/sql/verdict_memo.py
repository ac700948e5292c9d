"""The SQL world model's verdicts, kept: in this process, and across processes in the SQL work
memo (`cm_gym.domains.sql.workmemo`).

Why: RL training checks the same queries of the same tasks thousands of times, and every fresh
process (a new run, each worker of a vector env) checks the same first drafts again. A check is
deterministic — the step budget, never the clock, stops a query — so its verdict is a function
of the database's content, the reference, the query and the evaluator's limits.

What identifies the database's content:
- in this process: the file for an immutable database (SQLite assumes it never changes); else
  this process's connection to it and SQLite's commit counter on that connection (``PRAGMA
  data_version``, `Box.data_version`), so a write by anyone makes every kept verdict a miss;
- across processes: the sha256 of the file (and of its ``-wal`` file when there is one), computed
  once per process and content; files over `MAX_HASHED_BYTES` are kept in this process only.

What is never kept: the hang guard's verdict ("infrastructure"), a crash, and from the worker any
query that did not run to its result (kills by CPU time or memory depend on the machine);
`repeatable` decides. A stored verdict is the same `Outcome`, field for field.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cm_gym.core.types import Outcome
from cm_gym.core.workmemo import enabled as work_memo_enabled
from cm_gym.domains.verdict_codec import decode_outcome, encode_outcome

if TYPE_CHECKING:
    from cm_gym.domains.sql._engine import Engine

logger = logging.getLogger(__name__)

#: verdicts kept in this process per evaluator (oldest dropped first); 0 turns the memo off (the
#: world-model benches do, to time every check)
VERDICT_MEMO = 32_768
#: databases larger than this are not hashed: their verdicts stay in this process
MAX_HASHED_BYTES = 64 << 20


class VerdictMemo:
    """Verdicts by (database content, reference, query, limits); `size` 0 = off."""

    def __init__(self, size: int = VERDICT_MEMO) -> None:
        self.size = size
        self.hits = self.stored_hits = 0
        self._verdicts: dict[tuple[Any, ...], Outcome] = {}
        self._digests: dict[tuple[Any, ...], str | None] = {}
        self._limits: dict[tuple[Any, ...], str] = {}  # an evaluator's limits, as JSON

    def __len__(self) -> int:
        return len(self._verdicts)

    def __getstate__(self) -> dict[str, Any]:  # a pickled evaluator starts empty
        return {
            "size": self.size,
            "hits": 0,
            "stored_hits": 0,
            "_verdicts": {},
            "_digests": {},
            "_limits": {},
        }

    def key(self, engine: Engine, path: str, immutable: bool, progress_steps: int, rest: tuple[Any, ...]
            ) -> tuple[Any, ...] | None:  # fmt: skip
        """The in-process key of a check, or None when it must not be kept (memo off, or the file
        cannot be opened: it may appear later)."""
        if self.size <= 0:
            return None
        if immutable:
            version: tuple[int, int] = (0, 0)
        else:
            box = engine.boxes.get((path, False, progress_steps))
            if box is None:
                box, _ = engine.box(path, False, progress_steps) if path else (None, "")
                if box is None:
                    return None
            try:
                version = (box.serial, box.data_version())
            except sqlite3.Error:
                return None
        return (path, version, *rest)

    def get(self, key: tuple[Any, ...]) -> Outcome | None:
        """The kept verdict: from memory, else from the work memo (then kept in memory)."""
        found = self._verdicts.get(key)
        if found is not None:
            self.hits += 1
            return found
        stored = self._stored_key(key)
        if stored is None:
            return None
        from cm_gym.domains.sql.workmemo import sql_work

        data = sql_work().get(stored)
        outcome = decode_outcome(data) if data is not None else None
        if outcome is not None:
            self.stored_hits += 1
            self._keep(key, outcome)
        return outcome

    def put(self, key: tuple[Any, ...], outcome: Outcome) -> None:
        """Keep a repeatable verdict (in memory and in the work memo)."""
        self._keep(key, outcome)
        stored = self._stored_key(key)
        encoded = encode_outcome(outcome) if stored is not None else None
        if stored is not None and encoded is not None:
            from cm_gym.domains.sql.workmemo import sql_work

            sql_work().put(stored, encoded)

    def _keep(self, key: tuple[Any, ...], outcome: Outcome) -> None:
        if len(self._verdicts) >= self.size:
            del self._verdicts[next(iter(self._verdicts))]
        self._verdicts[key] = outcome

    def _stored_key(self, key: tuple[Any, ...]) -> bytes | None:
        """The work-memo key: the database's sha256 in place of its path and version."""
        if not work_memo_enabled():
            return None
        path, version = key[0], key[1]
        digest = self._digests.get((path, version), "")
        if digest == "":
            digest = self._digests[(path, version)] = _file_digest(path)
        if digest is None:
            return None
        from cm_gym.domains.sql.workmemo import memo_key

        limits = self._limits.get(key[4:])
        if limits is None:  # the evaluator's limits: the same few tuples on every check
            limits = self._limits[key[4:]] = json.dumps(key[4:], default=repr)
        return memo_key("verdict", sqlite3.sqlite_version, digest, key[2], key[3], limits)


def repeatable(outcome: Outcome, last_run: dict[str, Any]) -> bool:
    """Whether the same check gives the same verdict on any machine (`SQLEvaluator.last_run`
    says where the query ran): not the hang guard, not a crash, and from the worker only a query
    that ran to its result (its kills by CPU time or memory depend on the machine)."""
    where = last_run.get("where")
    if outcome.status == "infrastructure" or where == "crash":
        return False
    return where != "worker" or (outcome.status == "ok" and last_run.get("status") == "ok")


def _file_digest(path: str) -> str | None:
    """sha256 of the database file and its ``-wal`` file; None when missing or too large."""
    h = hashlib.sha256()
    try:
        for part in (Path(path), Path(path + "-wal")):
            if not part.exists() and part.name.endswith("-wal"):
                continue
            if part.stat().st_size > MAX_HASHED_BYTES:
                return None
            h.update(part.read_bytes())
            h.update(b"\0")
    except OSError:
        return None
    return h.hexdigest()
