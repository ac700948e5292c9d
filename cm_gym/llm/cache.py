"""Persistent LLM response cache (SQLite) and `CachedLLM`, the wrapper that makes replays exact.

RL training replays the same tasks thousands of times, and a seed alone does not make a vLLM
server repeat itself: the cache does. Keys are the sha256 of (backend identity — base URL, model,
sampling parameters, seed —, template name and version, rendered messages). Values are JSON.

Modes: ``"rw"`` (read, and write misses), ``"ro"`` (a miss raises `CacheMissError`: for CI and
exact replays), ``"off"`` (no file, every call goes to the backend). The file is in WAL mode with a
busy timeout and every write is its own ``BEGIN IMMEDIATE`` transaction, so several processes may
share one cache and a crash mid-write loses nothing already committed. A file that is not a
cm_gym cache, or is truncated or corrupt, gives `CacheCorruptError`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cm_gym.llm.base import LLM, Completion
from cm_gym.llm.errors import CacheCorruptError, CacheError, CacheMissError
from cm_gym.llm.prompts import render

logger = logging.getLogger(__name__)

MODES = ("rw", "ro", "off")
SCHEMA_NAME = "cm_gym.llm_response_cache"
SCHEMA_VERSION = "1"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def cache_key(
    identity: Mapping[str, Any], template: str, version: str, messages: list[dict[str, str]]
) -> str:
    """The sha256 key of one request: backend identity, template name+version, rendered messages."""
    payload = json.dumps(
        {"identity": dict(identity), "template": template, "version": version, "messages": messages},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """SQLite response cache with hit / miss / tokens-saved counters (see the module docstring)."""

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
        self.hits = self.misses = self.writes = self.tokens_saved = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        if mode == "off":
            return
        if self.path is None:
            raise CacheError(f"cache mode {mode!r} needs a path")
        try:
            self._conn = self._open(busy_timeout_s, synchronous, verify)
        except sqlite3.DatabaseError as exc:
            raise CacheCorruptError(f"{self.path} is not a readable cm_gym response cache: {exc}") from exc

    # -- opening --------------------------------------------------------------------------------
    def _open(self, busy_timeout_s: float, synchronous: str, verify: bool) -> sqlite3.Connection:
        assert self.path is not None
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists:
            with open(self.path, "rb") as fh:
                if fh.read(16) != _SQLITE_MAGIC:
                    raise CacheCorruptError(f"{self.path} is not an SQLite file (a cm_gym response cache is)")
        if self.mode == "ro":
            if not exists:
                raise CacheError(f"read-only cache {self.path} does not exist (build it in 'rw' mode first)")
            conn = self._connect_ro(busy_timeout_s)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if self.mode == "rw":
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {synchronous}")
                self._ensure_schema(conn)
            if verify:
                result = conn.execute("PRAGMA quick_check").fetchone()
                if not result or result[0] != "ok":
                    raise CacheCorruptError(f"{self.path} failed SQLite's integrity check: {result}")
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_ro(self, busy_timeout_s: float) -> sqlite3.Connection:
        """Read-only connection. A WAL file in a read-only folder without its -shm file cannot be
        opened normally; it is then opened as immutable (nobody can be writing to it there)."""
        assert self.path is not None
        base = f"file:{self.path.resolve()}?mode=ro"
        for uri in (base, base + "&immutable=1"):
            conn: sqlite3.Connection | None = None
            try:
                conn = sqlite3.connect(
                    uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
                )
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.OperationalError as exc:
                if conn is not None:
                    conn.close()
                if "unable to open" not in str(exc) or "immutable" in uri:
                    raise
                logger.info("opening %s as immutable (read-only folder): %s", self.path, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                conn.execute(
                    "CREATE TABLE responses (key TEXT PRIMARY KEY, template TEXT NOT NULL, "
                    "value TEXT NOT NULL, created REAL NOT NULL)"
                )
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("schema", SCHEMA_NAME), ("version", SCHEMA_VERSION)],
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
        if meta.get("schema") != SCHEMA_NAME or "responses" not in tables:
            raise CacheCorruptError(f"{self.path} is an SQLite file but not a cm_gym response cache")
        if meta.get("version") != SCHEMA_VERSION:
            raise CacheCorruptError(
                f"{self.path} is a cm_gym response cache of schema v{meta.get('version')}, expected v{SCHEMA_VERSION}"
            )

    # -- access ---------------------------------------------------------------------------------
    def get(self, key: str, template: str = "") -> dict[str, Any] | None:
        """The cached value of `key`, or None on a miss. In "ro" mode a miss raises
        `CacheMissError`; in "off" mode every lookup misses."""
        if self._conn is None:
            return None
        with self._lock:
            try:
                row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            except sqlite3.DatabaseError as exc:
                raise CacheCorruptError(f"reading {self.path} failed: {exc}") from exc
            if row is None:
                self.misses += 1
                if self.mode == "ro":
                    raise CacheMissError(
                        f"read-only cache {self.path} has no response for this {template or 'request'} "
                        f"(key {key[:16]}…): the replay differs from the recorded run"
                    )
                return None
            try:
                value = json.loads(row[0])
                tokens = int(value["prompt_tokens"]) + int(value["completion_tokens"])
                str(value["text"])
            except (ValueError, KeyError, TypeError) as exc:
                raise CacheCorruptError(
                    f"{self.path}: cached value for key {key[:16]}… is not valid: {exc}"
                ) from exc
            self.hits += 1
            self.tokens_saved += tokens
            return value

    def put(self, key: str, value: Mapping[str, Any], template: str = "") -> None:
        """Store `value` (JSON-serialisable) under `key` in one committed transaction; the first
        writer of a key wins. Only allowed in "rw" mode ("off" ignores it)."""
        if self._conn is None:
            return
        if self.mode != "rw":
            raise CacheError(f"cache {self.path} is read-only")
        data = json.dumps(dict(value), sort_keys=True, ensure_ascii=False)
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    self._conn.execute(
                        "INSERT OR IGNORE INTO responses (key, template, value, created) VALUES (?, ?, ?, ?)",
                        (key, template, data, time.time()),
                    )
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                raise CacheCorruptError(f"writing {self.path} failed: {exc}") from exc
            self.writes += 1

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        """Counters: hits, misses, writes, tokens_saved (tokens replayed instead of spent)."""
        return {
            "mode": self.mode,
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "tokens_saved": self.tokens_saved,
        }

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


def backend_identity(llm: LLM) -> dict[str, Any]:
    """A backend's identity for cache keys: its `cache_identity()` if it has one."""
    identity = getattr(llm, "cache_identity", None)
    if callable(identity):
        return dict(identity())
    return {"backend": type(llm).__qualname__, "name": getattr(llm, "name", "")}


class CachedLLM:
    """Wraps any `LLM` with a `ResponseCache`. A hit returns the recorded text with the recorded
    token counts (what the call *would* have cost) and ``cached=True``."""

    def __init__(self, inner: LLM, cache: ResponseCache) -> None:
        self.inner, self.cache = inner, cache
        self.name = getattr(inner, "name", "llm")
        self._identity = backend_identity(inner)

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """Replay from the cache, or call the inner LLM and record its reply."""
        if self.cache.mode == "off":
            return self.inner.complete(template, fields)
        rendered = render(template, fields)
        key = cache_key(self._identity, template, rendered.version, rendered.messages)
        value = self.cache.get(key, template)
        if value is not None:
            return Completion(
                str(value["text"]),
                int(value["prompt_tokens"]),
                int(value["completion_tokens"]),
                cached=True,
                estimated=bool(value.get("estimated", False)),
            )
        completion = self.inner.complete(template, fields)
        self.cache.put(
            key,
            {
                "text": completion.text,
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "estimated": completion.estimated,
                "template": template,
                "version": rendered.version,
            },
            template,
        )
        return completion
