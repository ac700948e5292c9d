"""`cm_gym.core.workmemo_files`: the work memo's files, when each was last used, and removing those
no live process holds (an upgrade's old versions). The command: `tests/cli/test_cache_work.py`."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from cm_gym.core import workmemo, workmemo_files
from cm_gym.core.workmemo import WorkMemo, marker_path, memo_key
from cm_gym.core.workmemo_files import clear_work, work_files


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    return tmp_path / "cache"


def written(version: str, value: str = "V") -> WorkMemo:
    memo = WorkMemo("t", version)
    memo.put(memo_key(version), value)
    memo.flush()
    return memo


def states() -> dict[str, str]:
    return {f.name: f.state for f in work_files()}


def age(memo: WorkMemo, days: float) -> None:
    """Set the memo's last use `days` back."""
    then = time.time() - days * 86400
    os.utime(marker_path(memo.path), (then, then))


def test_an_open_memo_is_marked_in_use_and_idle_once_closed(cache: Path) -> None:
    before = time.time()
    memo = written("v1")
    assert marker_path(memo.path).is_file()
    (entry,) = work_files()
    assert entry.name == memo.path.name and entry.state == "in use"
    assert entry.last_used >= before - 1 and entry.bytes >= memo.path.stat().st_size > 0
    memo.close()
    assert states() == {memo.path.name: "idle"}


def test_clear_removes_files_unused_for_n_days_with_their_side_files(cache: Path) -> None:
    old, new = written("old"), written("new")
    old.close()
    new.close()
    age(old, 40)
    removed, skipped = clear_work(30)
    assert [f.name for f in removed] == [old.path.name] and skipped == []
    leftovers = sorted(p.name for p in old.path.parent.iterdir() if p.name.startswith((old.path.name, ".")))
    assert [n for n in leftovers if old.path.name in n] == []  # db, -wal, -shm and marker
    assert states() == {new.path.name: "idle"}
    assert WorkMemo("t", "new").get(memo_key("new")) == "V"
    again = WorkMemo("t", "old")  # a removed file is simply started again
    assert again.get(memo_key("old")) is None
    again.put(memo_key("old"), "W")
    again.close()
    assert WorkMemo("t", "old").get(memo_key("old")) == "W"


def test_a_file_a_live_process_holds_is_never_removed(cache: Path) -> None:
    live = written("live")
    removed, skipped = clear_work()
    assert removed == [] and [f.name for f in skipped] == [live.path.name]
    assert live.path.is_file() and WorkMemo("t", "live").get(memo_key("live")) == "V"
    _, skipped = clear_work(dry_run=True)
    assert [f.name for f in skipped] == [live.path.name]


def test_a_dry_run_removes_nothing(cache: Path) -> None:
    memo = written("dry")
    memo.close()
    removed, _ = clear_work(dry_run=True)
    assert [f.name for f in removed] == [memo.path.name] and memo.path.is_file()
    assert marker_path(memo.path).is_file()


def test_files_that_are_not_work_memos_are_listed_and_never_removed(cache: Path) -> None:
    folder = cache / "work"
    folder.mkdir(parents=True)
    (folder / "junk.sqlite").write_bytes(os.urandom(2048))
    other = sqlite3.connect(folder / "mine.sqlite")
    other.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    other.execute("INSERT INTO meta VALUES ('format', 'somebody-else/1')")
    other.commit()
    other.close()
    (folder / "notes.txt").write_text("kept")
    assert states() == {"junk.sqlite": "not a work memo", "mine.sqlite": "not a work memo"}
    removed, skipped = clear_work(0)
    assert removed == skipped == []
    assert sorted(p.name for p in folder.iterdir()) == ["junk.sqlite", "mine.sqlite", "notes.txt"]


def test_listing_writes_nothing_beside_the_files(cache: Path) -> None:
    memo = written("look")
    memo.close()
    folder = memo.path.parent
    for side in ("-wal", "-shm"):
        Path(f"{memo.path}{side}").unlink(missing_ok=True)
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    work_files()
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_a_file_without_a_marker_was_last_used_when_last_written(cache: Path) -> None:
    memo = written("unmarked")
    memo.close()
    marker_path(memo.path).unlink()
    then = time.time() - 10 * 86400
    os.utime(memo.path, (then, then))
    (entry,) = work_files()
    assert entry.state == "idle" and abs(entry.last_used - then) < 2
    assert [f.name for f in clear_work(9)[0]] == [memo.path.name]


def test_a_memo_opened_during_a_clear_waits_and_then_marks_a_new_file(cache: Path) -> None:
    memo = written("race")
    memo.close()
    held = workmemo_files._take(marker_path(memo.path))  # what clear_work holds while removing
    assert held is not None
    opened: list[WorkMemo] = []
    thread = threading.Thread(target=lambda: opened.append(written("race", "NEW")))
    thread.start()
    time.sleep(0.1)
    assert not opened  # waiting for the clear
    for side in ("", "-wal", "-shm"):
        Path(f"{memo.path}{side}").unlink(missing_ok=True)
    marker_path(memo.path).unlink()
    os.close(held)
    thread.join(10)
    assert opened and states() == {memo.path.name: "in use"}  # the new marker is held
    assert clear_work()[0] == []


def test_the_wait_for_a_clear_is_bounded(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = written("stuck")
    memo.close()
    monkeypatch.setattr(workmemo, "MARK_WAIT_S", 0.05)
    held = workmemo_files._take(marker_path(memo.path))
    try:
        assert workmemo.mark_use(memo.path) is None  # goes on unmarked
        assert WorkMemo("t", "stuck").get(memo_key("stuck")) == "V"  # and still works
    finally:
        os.close(held)


def _child_uses(path_env: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    os.environ["CM_GYM_CACHE"] = path_env
    out.put(SHARED.get(memo_key("fork")))
    SHARED.close()  # closes the marker it inherited: the parent's lock must stay


SHARED: WorkMemo


def test_a_forked_child_closing_its_copy_leaves_the_parents_mark(cache: Path) -> None:
    global SHARED
    SHARED = written("fork")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_uses, args=(str(cache), out))
    child.start()
    child.join(30)
    assert out.get(timeout=5) == "V" and child.exitcode == 0
    assert states() == {SHARED.path.name: "in use"}
    SHARED.close()
    assert states() == {SHARED.path.name: "idle"}


def test_a_file_system_that_refuses_locks_removes_nothing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo = written("nolock")
    memo.close()

    def refuse(fd: int, op: int) -> None:
        raise OSError(37, "No locks available")  # ENOLCK, as some network file systems answer

    monkeypatch.setattr(workmemo_files.fcntl, "flock", refuse)
    removed, skipped = clear_work()
    assert removed == [] and [f.name for f in skipped] == [memo.path.name] and memo.path.is_file()
