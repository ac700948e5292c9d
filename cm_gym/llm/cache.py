"""Persistent LLM response cache (SQLite): the file that makes a run against a real model exact to
replay and free the second time.

Keys are the sha256 of the canonical JSON of (backend identity, template name and version, rendered
messages); the identity is what changes a reply — model, sampling parameters, seed — and *not* the
base URL, so a published cache replays anywhere (see `OpenAICompatibleLLM.cache_identity`). Each
row keeps the reply (JSON) and the compressed request it answers, so `cm-gym cache import` can
verify that a key really is the hash of its request.

Modes: ``"rw"`` (read, and write misses), ``"ro"`` (a miss raises `CacheMissError`, never calls the
backend), ``"off"`` (no file). The file is in WAL mode with a busy timeout; every write is its own
``BEGIN IMMEDIATE`` transaction, retried when another process holds the lock, so several processes
(vector envs, Ray workers) share one file and a crash mid-write loses nothing committed. The first
writer of a key wins and every writer returns the winning reply, so all processes agree.

Failures are one clear line each: a lock held too long is `CacheLockedError` (never "corrupt"), a
full disk or an unwritable file is `CacheWriteError`, a damaged or foreign file is
`CacheCorruptError`. A cache in a read-only folder still replays: in "ro" it is opened read-only
(immutable when its WAL index cannot be created); in "rw" it replays and stores nothing (one
warning).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from cm_gym.llm.cache_db import CacheFile, NotWritableError, retrying, rollback
from cm_gym.llm.errors import CacheCorruptError, CacheError, CacheMissError

logger = logging.getLogger(__name__)

T = TypeVar("T")
MODES = ("rw", "ro", "off")


def default_cache_path() -> Path:
    """``$CM_GYM_CACHE/llm/responses.sqlite`` (default ``~/.cache/cm_gym/...``), not created here."""
    from cm_gym.core.paths import cache_root

    return cache_root() / "llm" / "responses.sqlite"


def resolve_cache_path(path: str | Path | None) -> Path:
    """`path`, or the default cache file for None / ``"default"``."""
    if path is None or str(path) == "default":
        return default_cache_path()
    return Path(path).expanduser()


def request_payload(
    identity: Mapping[str, Any], template: str, version: str, messages: list[dict[str, str]]
) -> bytes:
    """The canonical bytes a key is the hash of (also what a row stores, compressed)."""
    return json.dumps(
        {"identity": dict(identity), "template": template, "version": version, "messages": messages},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")


def cache_key(
    identity: Mapping[str, Any], template: str, version: str, messages: list[dict[str, str]]
) -> str:
    """The sha256 key of one request: backend identity, template name+version, rendered messages."""
    return hashlib.sha256(request_payload(identity, template, version, messages)).hexdigest()


def decode_request(blob: bytes) -> tuple[str, dict[str, Any]]:
    """``(key, request)`` from a stored request blob; the key is recomputed, never trusted."""
    raw = zlib.decompress(blob)
    return hashlib.sha256(raw).hexdigest(), json.loads(raw)


def check_value(value: Any) -> dict[str, Any]:
    """A cached reply as a dict, or `ValueError` when it lacks text or integer token counts."""
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        raise ValueError("a cached reply needs a string 'text'")
    for name in ("prompt_tokens", "completion_tokens"):
        if not isinstance(value.get(name), int) or value[name] < 0:
            raise ValueError(f"a cached reply needs a non-negative integer {name!r}")
    return value


class ResponseCache:
    """SQLite response cache with hit / miss / write / tokens-saved counters (module docstring)."""

    def __init__(
        self,
        path: str | Path | None,
        mode: str = "rw",
        *,
        busy_timeout_s: float = 30.0,
        synchronous: str = "FULL",
        verify: bool = True,
    ) -> None:
        if mode not in MODES:
            raise CacheError(f"cache mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.path = Path(path).expanduser() if path is not None else None
        self.hits = self.misses = self.writes = self.tokens_saved = self.unsaved = 0
        self.writable = False
        self.busy_timeout_s = busy_timeout_s
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise CacheError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._has_request = True
        if mode == "off":
            return
        if self.path is None:
            raise CacheError(f"cache mode {mode!r} needs a path")
        opened = CacheFile(self.path, mode, busy_timeout_s, self._synchronous, verify)
        self._conn, self.writable, self._has_request = opened.conn, opened.writable, opened.has_request

    def _retrying(self, fn: Callable[[], T], doing: str) -> T:
        return retrying(fn, self.path, doing)

    # -- access ---------------------------------------------------------------------------------
    def get(self, key: str, template: str = "", task_id: str = "") -> dict[str, Any] | None:
        """The cached value of `key`, or None on a miss. In "ro" mode a miss raises
        `CacheMissError` naming the template and task; in "off" mode every lookup misses."""
        if self._conn is None:
            return None
        conn = self._conn
        with self._lock:
            row = self._retrying(
                lambda: conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone(),
                "reading",
            )
            if row is None:
                self.misses += 1
                if self.mode == "ro":
                    what = f"{template or 'request'}" + (f" of task {task_id}" if task_id else "")
                    raise CacheMissError(
                        f"read-only cache {self.path} has no reply for this {what} (key {key[:12]}): "
                        "fill it with `cm-gym tabulate` using the same model, sampling settings, seed "
                        "and run options, or use --llm-cache-mode rw"
                    )
                return None
            try:
                value = check_value(json.loads(row[0]))
            except ValueError as exc:
                raise CacheCorruptError(
                    f"{self.path}: cached value for key {key[:16]}… is not valid: {exc}"
                ) from exc
            self.hits += 1
            self.tokens_saved += value["prompt_tokens"] + value["completion_tokens"]
            return value

    def contains(self, key: str) -> bool:
        """Whether `key` is cached (no counters, no error in "ro")."""
        if self._conn is None:
            return False
        conn = self._conn
        with self._lock:
            return (
                self._retrying(
                    lambda: conn.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone(),
                    "reading",
                )
                is not None
            )

    def put(
        self, key: str, value: Mapping[str, Any], template: str = "", request: bytes | None = None
    ) -> dict[str, Any]:
        """Store `value` under `key` in one committed transaction and return the value the cache
        now holds: the first writer of a key wins, so a racing process gets the winner's reply.
        `request` is the key's `request_payload` (stored compressed, for verification)."""
        return self.put_many([(key, value, template, request)])[0]

    def put_many(
        self, items: Sequence[tuple[str, Mapping[str, Any], str, bytes | None]]
    ) -> list[dict[str, Any]]:
        """`put` for several ``(key, value, template, request)`` in one transaction (one fsync);
        returns the value held for each key afterwards."""
        if self._conn is None:
            return [dict(v) for _, v, _, _ in items]
        if self.mode != "rw":
            raise CacheError(f"cache {self.path} is read-only (mode {self.mode!r})")
        if not self.writable:
            self.unsaved += len(items)
            return [dict(v) for _, v, _, _ in items]
        rows = [
            (
                key,
                template,
                json.dumps(dict(value), sort_keys=True, ensure_ascii=False),
                time.time(),
                zlib.compress(request) if request is not None else None,
            )
            for key, value, template, request in items
        ]
        conn, has_request = self._conn, self._has_request

        def write() -> list[str]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                held: list[str] = []
                for key, template, data, created, blob in rows:
                    if has_request:
                        cur = conn.execute(
                            "INSERT OR IGNORE INTO responses (key, template, value, created, request) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (key, template, data, created, blob),
                        )
                    else:
                        cur = conn.execute(
                            "INSERT OR IGNORE INTO responses (key, template, value, created) VALUES (?, ?, ?, ?)",
                            (key, template, data, created),
                        )
                    if cur.rowcount == 1:
                        held.append(data)
                    else:
                        held.append(
                            conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()[0]
                        )
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            return held

        with self._lock:
            try:
                held = self._retrying(write, "writing")
            except NotWritableError as exc:
                logger.warning("%s; replies are no longer stored", exc)
                self.writable = False
                self.unsaved += len(items)
                return [dict(v) for _, v, _, _ in items]
            self.writes += sum(1 for (_, _, data, _, _), h in zip(rows, held, strict=True) if h is data)
        try:
            return [check_value(json.loads(h)) for h in held]
        except ValueError as exc:
            raise CacheCorruptError(f"{self.path}: a cached value is not valid: {exc}") from exc

    # -- whole-file access (stats, export, import) ----------------------------------------------
    def rows(self, chunk: int = 1000) -> Iterator[tuple[str, str, str, float, bytes | None]]:
        """Every row as ``(key, template, value JSON, created, request blob or None)``, by key,
        read `chunk` rows at a time (a large cache is never loaded whole)."""
        if self._conn is None:
            return
        conn = self._conn
        select = "request" if self._has_request else "NULL"
        sql = f"SELECT key, template, value, created, {select} FROM responses WHERE key > ? ORDER BY key LIMIT ?"
        last = ""
        while True:
            with self._lock:
                batch = self._retrying(lambda k=last: conn.execute(sql, (k, chunk)).fetchall(), "reading")
            yield from batch
            if len(batch) < chunk:
                return
            last = batch[-1][0]

    def values_of(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored value JSON of those of `keys` that are cached."""
        if self._conn is None or not keys:
            return {}
        conn, out = self._conn, {}
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            marks = ", ".join("?" * len(part))
            with self._lock:
                found = self._retrying(
                    lambda p=part, m=marks: conn.execute(
                        f"SELECT key, value FROM responses WHERE key IN ({m})", p
                    ).fetchall(),
                    "reading",
                )
            out.update(found)
        return out

    def insert_rows(self, rows: Iterable[tuple[str, str, str, float, bytes | None]]) -> int:
        """Insert rows in one transaction (all or nothing); existing keys are left alone.
        Returns how many were new."""
        if self._conn is None or self.mode != "rw" or not self.writable:
            raise CacheError(f"cache {self.path} is not writable: import needs a writable cache")
        conn = self._conn

        def write() -> int:
            conn.execute("BEGIN IMMEDIATE")
            try:
                before = conn.total_changes
                conn.executemany(
                    "INSERT OR IGNORE INTO responses (key, template, value, created, request) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
                added = conn.total_changes - before
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            return added

        with self._lock:
            added = self._retrying(write, "importing")
            self.writes += added
            return added

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        conn = self._conn
        with self._lock:
            return int(
                self._retrying(
                    lambda: conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0], "reading"
                )
            )

    def stats(self) -> dict[str, Any]:
        """Counters: hits, misses, writes, tokens_saved (tokens replayed instead of spent)."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "tokens_saved": self.tokens_saved,
        }
        if self.unsaved:
            out["unsaved"] = self.unsaved
        return out

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        logger.info("response cache %s closed: %s", self.path, self.stats())

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
