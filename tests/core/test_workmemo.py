"""`cm_gym.core.workmemo`: the persistent memo of pure work shared by processes (issue 35)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from cm_gym.core import workmemo
from cm_gym.core.workmemo import WorkMemo, memo_key


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    return tmp_path / "cache"


def through(memo: WorkMemo, text: str, calls: list[str]) -> str:
    def compute() -> str:
        calls.append(text)
        return text.upper()

    return memo.cached(memo_key("up", text), compute, str, lambda d: d if isinstance(d, str) else d.decode())


def test_keys_separate_their_parts() -> None:
    assert memo_key("ab", "c") != memo_key("a", "bc")
    assert memo_key("a", "b") == memo_key("a", "b") and len(memo_key("x")) == 16


def test_a_second_memo_reads_what_the_first_wrote(cache: Path) -> None:
    calls: list[str] = []
    first = WorkMemo("t", "v1")
    assert through(first, "select", calls) == "SELECT"
    first.close()
    later = WorkMemo("t", "v1")
    assert through(later, "select", calls) == "SELECT" and calls == ["select"] and later.hits == 1
    assert first.path.parent == cache / "work"


def test_another_version_never_reads_it(cache: Path) -> None:
    calls: list[str] = []
    v1 = WorkMemo("t", "v1")
    through(v1, "a", calls)
    v1.flush()
    v2 = WorkMemo("t", "v2")
    through(v2, "a", calls)
    assert calls == ["a", "a"] and v1.path != v2.path


def test_writes_wait_for_a_batch_or_a_flush(cache: Path) -> None:
    memo = WorkMemo("t", "batch")
    calls: list[str] = []
    for i in range(workmemo.FLUSH_EVERY - 1):
        through(memo, f"q{i}", calls)
    reader = WorkMemo("t", "batch")
    assert reader.get(memo_key("up", "q0")) is None
    reader.close()
    through(memo, "last", calls)  # the batch is full: written
    assert reader.get(memo_key("up", "q0")) == "Q0"


def test_a_slow_writer_writes_its_batch_after_flush_seconds(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that fills slowly is written at the first write `FLUSH_SECONDS` after the last
    batch, so other processes see it; before then it waits."""
    clock = [1000.0]
    monkeypatch.setattr(workmemo.time, "monotonic", lambda: clock[0])
    memo = WorkMemo("t", "slow")
    calls: list[str] = []
    through(memo, "a", calls)
    clock[0] += workmemo.FLUSH_SECONDS - 1
    through(memo, "b", calls)
    reader = WorkMemo("t", "slow")
    assert reader.get(memo_key("up", "a")) is None
    reader.close()
    clock[0] += 1
    through(memo, "c", calls)  # FLUSH_SECONDS since the memo was made: the batch is written
    assert [reader.get(memo_key("up", q)) for q in "abc"] == ["A", "B", "C"]
    reader.close()
    clock[0] += 1
    through(memo, "d", calls)  # one second after that batch: waits again
    assert reader.get(memo_key("up", "d")) is None


def test_a_memo_empty_when_opened_is_not_read_back(cache: Path) -> None:
    """The first process on a machine pays no lookups: it only writes (module doc)."""
    memo = WorkMemo("t", "first")
    memo.put(memo_key("up", "a"), "A")
    memo.flush()
    assert memo.get(memo_key("up", "b")) is None and memo._write_only
    other = WorkMemo("t", "first")
    assert other.get(memo_key("up", "a")) == "A" and not other._write_only


def _child(path_env: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    os.environ["CM_GYM_CACHE"] = path_env
    memo = SHARED
    out.put(memo.get(memo_key("up", "parent")))
    memo.put(memo_key("up", "child"), "CHILD")
    memo.flush()


SHARED: WorkMemo


def test_a_forked_child_opens_its_own_connection(cache: Path) -> None:
    global SHARED
    SHARED = WorkMemo("t", "fork")
    SHARED.put(memo_key("up", "parent"), "PARENT")
    SHARED.flush()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(str(cache), out))
    child.start()
    child.join(30)
    assert out.get(timeout=5) == "PARENT" and child.exitcode == 0
    SHARED.close()  # it opened the file empty: reopened, it reads what the child wrote
    assert SHARED.get(memo_key("up", "child")) == "CHILD"


def test_a_file_that_is_not_a_memo_is_left_alone(cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    memo = WorkMemo("t", "bad")
    memo.path.parent.mkdir(parents=True)
    memo.path.write_bytes(b"this is not sqlite at all" * 100)
    before = memo.path.read_bytes()
    calls: list[str] = []
    with caplog.at_level(logging.WARNING):
        assert through(memo, "x", calls) == "X" and through(memo, "x", calls) == "X"
    memo.flush()
    assert calls == ["x", "x"] and memo.path.read_bytes() == before
    assert sum("work memo" in r.message for r in caplog.records) == 1


def test_a_sqlite_file_of_another_kind_is_left_alone(cache: Path) -> None:
    memo = WorkMemo("t", "other")
    memo.path.parent.mkdir(parents=True)
    conn = sqlite3.connect(memo.path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('format', 'somebody else')")
    conn.commit()
    conn.close()
    calls: list[str] = []
    assert through(memo, "x", calls) == "X"
    memo.flush()
    conn = sqlite3.connect(memo.path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'memo'").fetchall() == []
    conn.close()


def test_an_undecodable_value_is_recomputed(cache: Path) -> None:
    memo = WorkMemo("t", "decode")
    memo.put(memo_key("n", "1"), "not a number")
    memo.flush()
    assert memo.cached(memo_key("n", "1"), lambda: 41 + 1, str, int) == 42


def test_a_read_only_cache_is_read_and_not_written(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = WorkMemo("t", "ro")
    memo.put(memo_key("up", "a"), "A")
    memo.flush()
    before = memo.path.read_bytes()
    monkeypatch.setattr(workmemo.os, "access", lambda path, mode: mode != os.W_OK)  # (root writes anyway)
    reader = WorkMemo("t", "ro")
    assert reader.get(memo_key("up", "a")) == "A"
    reader.put(memo_key("up", "b"), "B")
    reader.flush()
    assert reader.get(memo_key("up", "b")) is None and memo.path.read_bytes() == before


def test_switched_off_by_the_environment(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "0")
    memo = WorkMemo("t", "off")
    calls: list[str] = []
    through(memo, "a", calls)
    through(memo, "a", calls)
    memo.flush()
    assert calls == ["a", "a"] and not memo.path.exists()


def test_the_file_stops_growing_at_its_cap(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workmemo, "MAX_ROWS", 3)
    memo = WorkMemo("t", "cap")
    for i in range(5):
        memo.put(memo_key("k", str(i)), str(i))
    memo.flush()
    later = WorkMemo("t", "cap")
    later.put(memo_key("k", "new"), "new")
    later.flush()
    assert later.get(memo_key("k", "new")) is None and later.get(memo_key("k", "4")) == "4"


def _statements(memo: WorkMemo) -> list[str]:
    """The SQL statements `memo`'s open connection runs from now on."""
    assert memo._conn is not None
    seen: list[str] = []
    memo._conn.set_trace_callback(seen.append)
    return seen


def test_a_small_file_is_read_once_and_answered_from_memory(cache: Path) -> None:
    writer = WorkMemo("t", "preload")
    for i in range(10):
        writer.put(memo_key("up", f"k{i}"), f"K{i}")
    writer.flush()
    reader = WorkMemo("t", "preload")
    assert reader.get(memo_key("up", "k0")) == "K0"  # opens the file: one scan
    statements = _statements(reader)
    assert [reader.get(memo_key("up", f"k{i}")) for i in range(10)] == [f"K{i}" for i in range(10)]
    assert statements == []  # no lookup for what the scan read
    writer.put(memo_key("up", "late"), "LATE")  # another process writes after the scan
    writer.flush()
    assert reader.get(memo_key("up", "late")) == "LATE" and len(statements) == 1
    assert reader.get(memo_key("up", "never")) is None and reader.hits == 12


def test_a_file_over_the_preload_cap_is_looked_up(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = WorkMemo("t", "big")
    writer.put(memo_key("up", "a"), "A")
    writer.flush()
    monkeypatch.setattr(workmemo, "PRELOAD_BYTES", 0)
    reader = WorkMemo("t", "big")
    assert reader.get(memo_key("up", "a")) == "A" and not reader._loaded
    statements = _statements(reader)
    assert reader.get(memo_key("up", "a")) == "A" and len(statements) == 1


def test_another_cache_folder_is_never_answered_from_the_first_ones_copy(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder, value in ((cache, "FIRST"), (tmp_path / "other", "OTHER")):
        monkeypatch.setenv("CM_GYM_CACHE", str(folder))
        writer = WorkMemo("t", "roots")
        writer.put(memo_key("up", "k"), value)
        writer.put(memo_key("up", f"only-{value}"), value)
        writer.close()
    memo = WorkMemo("t", "roots")  # CM_GYM_CACHE is the other folder now
    assert memo.get(memo_key("up", "k")) == "OTHER"
    monkeypatch.setenv("CM_GYM_CACHE", str(cache))
    assert memo.get(memo_key("up", "k")) == "FIRST" and memo.get(memo_key("up", "only-OTHER")) is None
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "empty"))  # a folder with no memo yet
    assert memo.get(memo_key("up", "k")) is None and memo.get(memo_key("up", "only-FIRST")) is None


def test_the_switch_follows_every_change_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`enabled` reads os.environ's own dict (`_getenv`): a variable set, changed, deleted, or an
    os.environ replaced by a plain mapping is seen on the next call."""
    monkeypatch.delenv(workmemo.ENV_SWITCH, raising=False)
    assert workmemo.enabled()
    for value, on in (("0", False), ("Off", False), ("1", True), (" no ", False), ("yes", True)):
        monkeypatch.setenv(workmemo.ENV_SWITCH, value)
        assert workmemo.enabled() is on and workmemo._getenv(workmemo.ENV_SWITCH) == value
    monkeypatch.delenv(workmemo.ENV_SWITCH)
    assert workmemo.enabled() and workmemo._getenv(workmemo.ENV_SWITCH) is None
    monkeypatch.setattr(os, "environ", {workmemo.ENV_SWITCH: "false"})  # not CPython's mapping
    assert not workmemo.enabled() and workmemo._getenv("HOME") is None
