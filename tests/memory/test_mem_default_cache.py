"""`cm-gym cache list|clear`: the default-store cache as the user sees it."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest

from cm_gym.cli import main
from cm_gym.memory.defaults import default_snapshot
from cm_gym.memory.locking import FileLock


def _hold(lock: str, ready: mp.Event, done: mp.Event) -> None:
    with FileLock(Path(lock)):
        ready.set()
        done.wait(30)


def test_list_and_clear(
    memtoy_benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path))
    a = default_snapshot(memtoy_benchmark, n_build=3)
    b = default_snapshot(memtoy_benchmark, n_build=2)
    assert main(["cache", "list", "--json"]) == 0
    entries = {e["path"]: e for e in json.loads(capsys.readouterr().out)}
    assert set(entries) == {str(a), str(b)}
    assert all(
        e["state"] == "ok" and e["benchmark"] == "MEMTOY" and e["records"] >= 1 for e in entries.values()
    )
    assert entries[str(a)]["settings"]["n_tasks"] == 3

    data = bytearray(b.read_bytes())
    data[-50] ^= 0xFF
    b.write_bytes(bytes(data))
    ctx = mp.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(a.with_name(f".{a.name}.lock")), ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        assert main(["cache", "list"]) == 0
        table = capsys.readouterr().out
        assert "in use" in table and "unusable" in table
        assert main(["cache", "clear"]) == 0
        out = capsys.readouterr()
        assert "removed 1 default store(s); 1 in use" in out.out and str(a) in out.err
        assert a.is_file() and not b.exists()
    finally:
        done.set()
        holder.join(30)
    assert main(["cache", "clear", "--benchmark", "MEMTOY", "--dry-run"]) == 0
    assert a.is_file() and "would remove 1" in capsys.readouterr().out
    assert main(["cache", "clear", "--benchmark", "MEMTOY"]) == 0
    assert [p.name for p in (tmp_path / "stores").iterdir()] == []
