"""Response cache under stress (issue 11 item 1, issue 14 item 5): a lock held by another process is
"locked", never "corrupt"; a full disk is one clear error and loses nothing committed; a read-only
file or folder still replays; processes racing on one key agree on one reply; a v1 cache is read and
migrated; export / import make a cache a portable, verified artefact."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cm_gym.cli import main
from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION, REFLECT
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cache_io import export_cache, import_cache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import (
    CacheConflictError,
    CacheCorruptError,
    CacheError,
    CacheLockedError,
    CacheMissError,
    CacheWriteError,
)
from cm_gym.llm.simulated import SimulatedLLM

_VALUE = {"text": "t", "prompt_tokens": 1, "completion_tokens": 2}

_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    """
)


def test_a_lock_held_by_another_process_is_locked_not_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with ResponseCache(path, "rw") as cache:
        cache.put("before", _VALUE)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), "2.5"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        cache = ResponseCache(path, "rw", busy_timeout_s=0.2)  # opening needs no write lock
        assert cache.get("before") == _VALUE  # WAL readers are not blocked
        with pytest.raises(CacheLockedError, match="locked by another process") as info:
            cache.put("k", _VALUE)
        assert "corrupt" not in str(info.value) and "\n" not in str(info.value)
    finally:
        holder.wait(timeout=30)
    cache.put("k", _VALUE)  # once the other process is done, writing works again
    assert cache.get("k") == _VALUE
    cache.close()


def test_a_full_disk_is_one_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path, "rw")
    for i in range(20):
        cache.put(f"k{i}", _VALUE | {"text": f"reply {i}"})
    assert cache._conn is not None
    pages = cache._conn.execute("PRAGMA page_count").fetchone()[0]
    cache._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's real SQLITE_FULL path
    with pytest.raises(CacheWriteError, match="no space left") as info:
        cache.put("big", _VALUE | {"text": "x" * 200_000})
    assert "\n" not in str(info.value)
    cache.close()
    with ResponseCache(path, "ro") as again:
        assert len(again) == 20 and again.get("k7")["text"] == "reply 7"  # type: ignore[index]


def test_read_only_file_or_folder_still_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    path = tmp_path / "c.sqlite"
    with ResponseCache(path, "rw") as cache:
        cache.put("k", _VALUE)
    # 1. the file becomes read-only while open (SQLite's own read-only error: PRAGMA query_only)
    cache = ResponseCache(path, "rw")
    assert cache._conn is not None
    cache._conn.execute("PRAGMA query_only = 1")
    assert cache.put("new", _VALUE | {"text": "n"})["text"] == "n"  # returned, not stored
    assert not cache.writable and cache.unsaved == 1 and "not writable" in caplog.text
    assert cache.get("k") == _VALUE
    cache.close()
    # 2. the folder cannot be written when opening (as root, chmod would not stop us: the error
    # SQLite gives in a read-only folder is injected for the read-write connection only)
    real_connect = sqlite3.connect

    def connect(database: Any, *args: Any, **kw: Any) -> sqlite3.Connection:
        if not str(database).startswith("file:"):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(database, *args, **kw)

    monkeypatch.setattr(sqlite3, "connect", connect)
    degraded = ResponseCache(path, "rw")
    assert not degraded.writable and degraded.get("k") == _VALUE
    with ResponseCache(path, "ro") as ro:
        assert ro.get("k") == _VALUE
    with pytest.raises(CacheWriteError, match="cannot create response cache"):
        ResponseCache(tmp_path / "absent" / "c.sqlite", "rw")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_folder_by_permissions(tmp_path: Path) -> None:  # pragma: no cover - non-root CI only
    folder = tmp_path / "ro"
    folder.mkdir()
    with ResponseCache(folder / "c.sqlite", "rw") as cache:
        cache.put("k", _VALUE)
    folder.chmod(0o555)
    try:
        assert ResponseCache(folder / "c.sqlite", "ro").get("k") == _VALUE
        assert ResponseCache(folder / "c.sqlite", "rw").get("k") == _VALUE
    finally:
        folder.chmod(0o755)


_RACER = textwrap.dedent(
    """
    import json, sys
    from cm_gym.llm.cache import ResponseCache
    cache = ResponseCache(sys.argv[1], "rw")
    got = [cache.put(f"k{i}", {"text": sys.argv[2] + str(i), "prompt_tokens": 1, "completion_tokens": 1})["text"]
           for i in range(60)]
    print(json.dumps(got))
    """
)


def test_processes_racing_on_the_same_keys_agree(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    ResponseCache(path, "rw").close()
    procs = [
        subprocess.Popen([sys.executable, "-c", _RACER, str(path), who], stdout=subprocess.PIPE, text=True)
        for who in ("a", "b", "c")
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    with ResponseCache(path, "ro") as cache:
        held = [cache.get(f"k{i}")["text"] for i in range(60)]  # type: ignore[index]
    assert outs[0] == outs[1] == outs[2] == held  # every process got the reply that was kept


def test_ro_miss_names_template_and_task(tmp_path: Path, toy: list[Task]) -> None:
    path = tmp_path / "c.sqlite"
    rw = CachedLLM(SimulatedLLM(seed=1), ResponseCache(path, "rw"))
    rw.complete(DRAFT_ACTION, {"task": toy[0]})
    rw.cache.close()
    ro = CachedLLM(SimulatedLLM(seed=1), ResponseCache(path, "ro"))
    assert ro.complete(DRAFT_ACTION, {"task": toy[0]}).cached
    with pytest.raises(CacheMissError, match=f"DRAFT_ACTION of task {toy[2].task_id}.*cm-gym tabulate"):
        ro.complete(DRAFT_ACTION, {"task": toy[2]})


def test_v1_cache_is_read_and_migrated(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, template TEXT, value TEXT, created REAL)")
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)", [("schema", "cm_gym.llm_response_cache"), ("version", "1")]
        )
        conn.execute("INSERT INTO responses VALUES ('old', 'REFLECT', ?, 0)", (json.dumps(_VALUE),))
    with ResponseCache(path, "ro") as ro:
        assert ro.get("old") == _VALUE
    with ResponseCache(path, "rw") as rw:
        assert rw.get("old") == _VALUE
        rw.put("new", _VALUE, "REFLECT", request=b"{}")
    with sqlite3.connect(path) as conn:
        assert dict(conn.execute("SELECT key, value FROM meta"))["version"] == "2"
        assert conn.execute("SELECT request IS NULL FROM responses WHERE key = 'old'").fetchone() == (1,)


def _filled(path: Path, toy: list[Task], seed: int = 1, n: int = 6) -> CachedLLM:
    llm = CachedLLM(SimulatedLLM(seed=seed), ResponseCache(path, "rw"))
    for task in toy[:n]:
        llm.complete(DRAFT_ACTION, {"task": task})
        llm.complete(REFLECT, {"task": task, "feedback": "rows differ"})
    return llm


def test_export_import_round_trip_and_refusals(tmp_path: Path, toy: list[Task]) -> None:
    source = _filled(tmp_path / "a.sqlite", toy)
    out = tmp_path / "a.jsonl.gz"
    assert export_cache(source.cache, out) == 12
    target = ResponseCache(tmp_path / "b.sqlite", "rw")
    report = import_cache(target, out)
    assert (report.read, report.added, report.present, report.conflicts) == (12, 12, 0, [])
    assert sorted(r[:3] for r in target.rows()) == sorted(r[:3] for r in source.cache.rows())
    replay = CachedLLM(SimulatedLLM(seed=1), target)
    assert all(replay.complete(DRAFT_ACTION, {"task": t}).cached for t in toy[:6])
    assert import_cache(target, out).present == 12  # idempotent

    text = gzip.decompress(out.read_bytes()).decode()
    edited = tmp_path / "edited.jsonl"
    edited.write_text(text.replace('"text": "', '"text": "EDITED ', 1))
    with pytest.raises(CacheCorruptError, match="checksum"):
        import_cache(target, edited)
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(text.splitlines()[:-1]) + "\n")
    with pytest.raises(CacheCorruptError, match="truncated"):
        import_cache(target, truncated)

    # the same request answered differently (e.g. a model run at temperature > 0): refused loudly
    other = ResponseCache(tmp_path / "c.sqlite", "rw")
    first_key = next(source.cache.rows())[0]
    other.put(first_key, {"text": "a different reply", "prompt_tokens": 1, "completion_tokens": 1})
    with pytest.raises(CacheConflictError, match="1 entry .* conflict.*nothing was imported"):
        import_cache(other, out)
    assert len(other) == 1
    report = import_cache(other, out, skip_conflicts=True)
    assert report.added == 11 and len(report.conflicts) == 1
    assert other.get(first_key)["text"] == "a different reply"  # type: ignore[index]


def test_cache_commands(tmp_path: Path, toy: list[Task], capsys: Any) -> None:
    _filled(tmp_path / "a.sqlite", toy, n=3).cache.close()
    assert main(["cache", "stats", "--llm-cache", str(tmp_path / "a.sqlite"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entries"] == 6 and stats["templates"] == {"DRAFT_ACTION": 3, "REFLECT": 3}
    assert (
        main(["cache", "export", str(tmp_path / "x.jsonl"), "--llm-cache", str(tmp_path / "a.sqlite")]) == 0
    )
    assert (
        main(["cache", "import", str(tmp_path / "x.jsonl"), "--llm-cache", str(tmp_path / "b.sqlite")]) == 0
    )
    assert "imported 6 new entries" in capsys.readouterr().out
    assert main(["cache", "stats", "--llm-cache", str(tmp_path / "missing.sqlite")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(CacheError, match="not writable"):
        ResponseCache(tmp_path / "b.sqlite", "ro").insert_rows([])


def test_construction_never_falls_back_on_a_replay_miss(tmp_path: Path, toy: list[Task]) -> None:
    """Construction falls back to rule-based edits / distillation when the LLM fails; a read-only
    replay that lacks the reply must not (it would silently build different memory)."""
    from cm_gym.agent import Cost
    from cm_gym.core.types import AgentState, Outcome
    from cm_gym.domains.registry import get_domain
    from cm_gym.memory.alternatives import AlternativeGenerator
    from cm_gym.memory.distill import Distiller

    path = tmp_path / "empty.sqlite"
    ResponseCache(path, "rw").close()
    replay = CachedLLM(SimulatedLLM(seed=1), ResponseCache(path, "ro"))
    domain = get_domain(toy[0].domain)
    state, failed = AgentState(toy[0]), Outcome(score=0.0, solved=False, feedback="rows differ")
    with pytest.raises(CacheMissError, match="GENERATE_LOCAL_ALTERNATIVES"):
        AlternativeGenerator(replay, domain, 4).generate(state, toy[0].reference, failed, Cost())
    with pytest.raises(CacheMissError, match="DISTIL_RECORD"):
        Distiller(replay, domain).distil(state, "a", "b", "evidence", Cost())
