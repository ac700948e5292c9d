"""Response cache: modes, counters, keys, corrupt / foreign / truncated files, crash safety,
concurrent writers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION, REFLECT, Completion
from cm_gym.llm.cache import ResponseCache, cache_key
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import CacheCorruptError, CacheError, CacheMissError


class CountingLLM:
    """A fake backend that counts calls and answers with the call number."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "counting", "model": "m", "seed": 0}

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        self.calls += 1
        return Completion(
            f"reply {self.calls} to {fields.get('feedback')}", 100 + self.calls, 7, estimated=True
        )


def _fields(i: int) -> dict[str, Any]:
    return {"task_id": f"t-{i}", "question": "q", "feedback": f"feedback {i}", "last_action": "a"}


def test_rw_then_ro_replays_exactly(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    inner = CountingLLM()
    llm = CachedLLM(inner, ResponseCache(path, "rw"))
    first = [llm.complete(REFLECT, _fields(i)) for i in range(5)]
    again = [llm.complete(REFLECT, _fields(i)) for i in range(5)]
    assert inner.calls == 5
    assert [c.text for c in again] == [c.text for c in first]
    assert all(c.cached for c in again) and not any(c.cached for c in first)
    assert [(c.prompt_tokens, c.completion_tokens, c.estimated) for c in again] == [
        (c.prompt_tokens, c.completion_tokens, c.estimated) for c in first
    ]
    assert llm.cache.stats() == {
        "mode": "rw",
        "hits": 5,
        "misses": 5,
        "writes": 5,
        "tokens_saved": sum(c.total_tokens for c in first),
    }
    llm.cache.close()

    replay_inner = CountingLLM()
    replay = CachedLLM(replay_inner, ResponseCache(path, "ro"))
    assert [replay.complete(REFLECT, _fields(i)).text for i in range(5)] == [c.text for c in first]
    assert replay_inner.calls == 0
    with pytest.raises(CacheMissError, match="REFLECT"):
        replay.complete(REFLECT, _fields(99))
    assert replay.cache.misses == 1 and replay_inner.calls == 0
    with pytest.raises(CacheError):
        replay.cache.put("k", {"text": "x", "prompt_tokens": 1, "completion_tokens": 1})


def test_off_mode_and_missing_ro_file(tmp_path: Path) -> None:
    inner = CountingLLM()
    llm = CachedLLM(inner, ResponseCache(None, "off"))
    llm.complete(REFLECT, _fields(1))
    llm.complete(REFLECT, _fields(1))
    assert inner.calls == 2 and not list(tmp_path.iterdir())
    with pytest.raises(CacheError, match="does not exist"):
        ResponseCache(tmp_path / "absent.sqlite", "ro")
    with pytest.raises(CacheError, match="mode"):
        ResponseCache(tmp_path / "x.sqlite", "append")


def test_key_depends_on_every_part() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    ident = {"base_url": "http://h/v1", "model": "m", "temperature": 0.0, "seed": 0}
    base = cache_key(ident, DRAFT_ACTION, "1", messages)
    assert base == cache_key(dict(reversed(list(ident.items()))), DRAFT_ACTION, "1", messages)
    variants = [
        cache_key(ident | {"model": "m2"}, DRAFT_ACTION, "1", messages),
        cache_key(ident | {"seed": 1}, DRAFT_ACTION, "1", messages),
        cache_key(ident | {"temperature": 0.7}, DRAFT_ACTION, "1", messages),
        cache_key(ident | {"base_url": "http://other/v1"}, DRAFT_ACTION, "1", messages),
        cache_key(ident, DRAFT_ACTION, "2", messages),
        cache_key(ident, REFLECT, "1", messages),
        cache_key(ident, DRAFT_ACTION, "1", [messages[0], {"role": "user", "content": "u2"}]),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_garbage_and_foreign_files_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(os.urandom(4096))
    for mode in ("rw", "ro"):
        with pytest.raises(CacheCorruptError, match="not an SQLite file"):
            ResponseCache(garbage, mode)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(CacheCorruptError, match="not a cm_gym response cache"):
        ResponseCache(foreign, "rw")
    with sqlite3.connect(foreign) as conn:  # the foreign file was not modified
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]


def test_truncated_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ResponseCache(path, "rw")
    for i in range(300):
        cache.put(f"key-{i}", {"text": "x" * 500, "prompt_tokens": 1, "completion_tokens": 1})
    cache.close()  # checkpoints the WAL into the main file
    assert not Path(str(path) + "-wal").exists() or Path(str(path) + "-wal").stat().st_size == 0
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CacheCorruptError):
        ResponseCache(path, "ro")


def test_corrupt_row_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    ResponseCache(path, "rw").close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO responses VALUES ('k', 'T', '{not json', 0, NULL)")
    with pytest.raises(CacheCorruptError, match="not valid"):
        ResponseCache(path, "ro").get("k")


_WRITER = textwrap.dedent(
    """
    import sys
    from cm_gym.llm.cache import ResponseCache
    cache = ResponseCache(sys.argv[1], "rw")
    prefix, n = sys.argv[2], int(sys.argv[3])
    for i in range(n):
        cache.put(f"{prefix}-{i}", {"text": prefix * 50, "prompt_tokens": i, "completion_tokens": 1})
        print(i, flush=True)
    """
)


def test_crash_mid_write_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), "w", "1000000"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    committed = -1
    for line in proc.stdout:
        committed = int(line)
        if committed >= 60:
            break
    os.kill(proc.pid, signal.SIGKILL)  # mid-loop: possibly inside a transaction
    proc.wait(timeout=30)
    cache = ResponseCache(path, "rw")  # opens, passes the integrity check
    assert len(cache) >= committed + 1
    for i in range(committed + 1):
        value = cache.get(f"w-{i}")
        assert value is not None and value["prompt_tokens"] == i
    cache.put("after", {"text": "ok", "prompt_tokens": 1, "completion_tokens": 1})  # still writable
    cache.close()


def test_concurrent_processes_share_one_cache(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    ResponseCache(path, "rw").close()
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), prefix, "40"], stdout=subprocess.DEVNULL)
        for prefix in ("a", "b", "c")
    ]
    deadline = time.monotonic() + 120
    for proc in procs:
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0
    cache = ResponseCache(path, "ro")
    assert len(cache) == 120
    assert cache.get("c-39") == {"text": "c" * 50, "prompt_tokens": 39, "completion_tokens": 1}


def test_simulated_llm_can_be_cached(tmp_path: Path, toy: list[Task]) -> None:
    from cm_gym.llm.simulated import SimulatedLLM

    llm = CachedLLM(SimulatedLLM(seed=5), ResponseCache(tmp_path / "c.sqlite", "rw"))
    first = llm.complete(DRAFT_ACTION, {"task": toy[0]})
    second = llm.complete(DRAFT_ACTION, {"task": toy[0]})
    assert (
        second.cached
        and second.text == first.text == SimulatedLLM(seed=5).complete(DRAFT_ACTION, {"task": toy[0]}).text
    )
    other_seed = CachedLLM(SimulatedLLM(seed=6), llm.cache)
    assert not other_seed.complete(DRAFT_ACTION, {"task": toy[0]}).cached  # seed is in the key


def test_ro_falls_back_to_immutable_when_wal_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a read-only folder SQLite cannot create the -shm file of a WAL database ("unable to
    open database file"); the read-only cache then opens the file as immutable."""
    path = tmp_path / "c.sqlite"
    with ResponseCache(path, "rw") as cache:
        cache.put("k", {"text": "t", "prompt_tokens": 1, "completion_tokens": 2})
    real_connect = sqlite3.connect
    uris: list[str] = []

    def connect(database: str, *args: Any, **kw: Any) -> sqlite3.Connection:
        uris.append(str(database))
        if "immutable=1" not in str(database):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(database, *args, **kw)

    monkeypatch.setattr(sqlite3, "connect", connect)
    cache = ResponseCache(path, "ro")
    assert cache.get("k") == {"text": "t", "prompt_tokens": 1, "completion_tokens": 2}
    assert uris[0].endswith("mode=ro&immutable=1")  # the write-free look at what the file is
    assert len(uris) == 3 and uris[1].endswith("mode=ro") and uris[2].endswith("mode=ro&immutable=1")


def test_a_database_whose_creator_has_not_committed_its_tables_is_opened(tmp_path: Path) -> None:
    """Ray workers open one cache together: the first has set WAL mode but holds its write lock
    before the tables exist. The others must wait for it, not call the file foreign."""
    path = tmp_path / "llm.sqlite"
    creator = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    creator.execute("PRAGMA journal_mode = WAL")
    creator.execute("BEGIN IMMEDIATE")  # the cache's tables are about to be created
    creator.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    threading.Timer(0.3, lambda: creator.execute("ROLLBACK")).start()
    cache = ResponseCache(path, "rw")  # waits on the lock, then creates the tables itself
    cache.close()
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert names == {"meta", "responses"}
    creator.close()
