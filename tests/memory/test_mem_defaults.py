"""`default_snapshot`: built once into the cache, reused, keyed by the settings, safe under threads."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from cm_gym.core.paths import cache_dir
from cm_gym.memory.defaults import default_snapshot
from cm_gym.memory.snapshot import FrozenStore


def test_default_snapshot_is_built_once_and_reused(memtoy_benchmark: str) -> None:
    path = default_snapshot(memtoy_benchmark, n_build=6)
    assert path.parent == cache_dir("stores") and path.name.startswith("MEMTOY-")
    snap = FrozenStore.open(path)
    assert snap.benchmark == "MEMTOY" and len(snap.processed_task_ids) == 6 and len(snap) >= 1
    mtime = path.stat().st_mtime_ns
    assert default_snapshot(memtoy_benchmark, n_build=6) == path
    assert path.stat().st_mtime_ns == mtime  # reused, not rebuilt
    other = default_snapshot(memtoy_benchmark, n_build=4, seed=1)
    assert other != path and len(FrozenStore.open(other).processed_task_ids) == 4
    # this benchmark's files only: the suite runs in parallel (pytest -n 2) and other tests build
    # other stores in the same cache folder meanwhile
    ours = [p.name for p in path.parent.iterdir() if p.name.lstrip(".").startswith("MEMTOY-")]
    leftovers = [n for n in ours if "building" in n or n.endswith(".tmp")]
    assert leftovers == []


def test_a_tampered_cached_snapshot_is_rebuilt(memtoy_benchmark: str) -> None:
    path = default_snapshot(memtoy_benchmark, n_build=3)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    path.write_bytes(bytes(data))
    again = default_snapshot(memtoy_benchmark, n_build=3)
    assert again == path and len(FrozenStore.open(path).processed_task_ids) == 3


def test_concurrent_callers_get_one_verified_file(memtoy_benchmark: str) -> None:
    results: list[Path] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(default_snapshot(memtoy_benchmark, n_build=5, seed=7))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(results) == 3 and len(set(results)) == 1
    FrozenStore.open(results[0])
    assert os.path.getsize(results[0]) > 0


def test_the_key_covers_task_content_and_domain_version(
    memtoy_benchmark: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    import dataclasses
    import logging

    from memfakes import ToyDomain, make_tasks

    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path))  # a fresh cache: the first call builds
    from cm_gym.domains import registry

    with caplog.at_level(logging.INFO, logger="cm_gym.memory.defaults"):
        base = default_snapshot(memtoy_benchmark, n_build=4)
    building = [r for r in caplog.records if "building the default MEMTOY store" in r.getMessage()]
    assert building and all(r.levelno == logging.INFO for r in building)  # an ordinary build is no warning
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="cm_gym.memory.defaults"):
        assert default_snapshot(memtoy_benchmark, n_build=4) == base
    assert not caplog.records  # reuse is silent

    def edited(**kw: object) -> list:
        tasks = make_tasks(40)
        return [dataclasses.replace(t, reference=t.reference + " ") for t in tasks]  # same ids

    spec = registry._BENCHMARKS[memtoy_benchmark]
    monkeypatch.setitem(registry._BENCHMARKS, memtoy_benchmark, dataclasses.replace(spec, load_tasks=edited))
    content = default_snapshot(memtoy_benchmark, n_build=4)
    assert content != base  # edited gold actions: not the old records
    monkeypatch.setitem(registry._BENCHMARKS, memtoy_benchmark, spec)
    monkeypatch.setattr(ToyDomain, "version", "2")
    versioned = default_snapshot(memtoy_benchmark, n_build=4)
    assert versioned not in (base, content)
    monkeypatch.setattr(ToyDomain, "version", None)
    assert ToyDomain().code_version().startswith("src-")
    assert default_snapshot(memtoy_benchmark, n_build=4) == base


def test_a_benchmarks_default_n_build_caps_the_default_store(memtoy_benchmark: str) -> None:
    """A benchmark with a slow world model registers `default_n_build`: a bare default store is
    built on that many build tasks; an explicit `n_build` still wins."""
    import dataclasses

    from cm_gym.domains import registry

    spec = registry._BENCHMARKS[memtoy_benchmark]
    registry._BENCHMARKS[memtoy_benchmark] = dataclasses.replace(spec, default_n_build=3)
    try:
        capped = default_snapshot(memtoy_benchmark)
        assert len(FrozenStore.open(capped).processed_task_ids) == 3
        assert default_snapshot(memtoy_benchmark, n_build=3) == capped
        assert len(FrozenStore.open(default_snapshot(memtoy_benchmark, n_build=5)).processed_task_ids) == 5
    finally:
        registry._BENCHMARKS[memtoy_benchmark] = spec


def test_an_ordinary_first_build_is_announced_not_warned(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """`check-domain` and a bare `gym.make` show the first build as a plain line beside its progress
    bar (issue 36: it was a WARNING); through logging instead when INFO is shown, never twice."""
    import logging

    from cm_gym.memory.defaults import _announce

    monkeypatch.setenv("CM_GYM_PROGRESS", "1")
    caplog.set_level(logging.WARNING, logger="cm_gym.memory.defaults")
    _announce("building the default X store")
    assert capsys.readouterr().err == "building the default X store\n"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    caplog.set_level(logging.INFO, logger="cm_gym.memory.defaults")
    _announce("ready")
    assert capsys.readouterr().err == "" and [r.levelno for r in caplog.records] == [logging.INFO]
    caplog.set_level(logging.WARNING, logger="cm_gym.memory.defaults")
    monkeypatch.setenv("CM_GYM_PROGRESS", "0")
    _announce("quiet")
    assert capsys.readouterr().err == ""


def test_check_domain_strict_logs_an_ordinary_first_build_at_info_only(
    memtoy_benchmark: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Issue 36: `cm-gym check-domain --strict` builds the default store on first use; that build
    is ordinary (INFO), so no WARNING record comes out of it unless the store is really too small."""
    import logging

    from cm_gym.cli import main
    from cm_gym.memory.defaults import MIN_USEFUL_RECORDS

    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path))  # a fresh cache: check-domain builds
    with caplog.at_level(logging.INFO, logger="cm_gym"):
        main(["check-domain", memtoy_benchmark, "--strict", "--max-tasks", "5"])
    ordinary = ("building the default MEMTOY store", "default MEMTOY store ready")
    built = [r for r in caplog.records if r.getMessage().startswith(ordinary)]
    assert len(built) == 2 and all(r.levelno == logging.INFO for r in built)  # start and end: INFO
    n_records = len(FrozenStore.open(default_snapshot(memtoy_benchmark)))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if w.startswith(ordinary)]
    # the one WARNING left is a real problem: this toy store is below the useful size
    assert n_records < MIN_USEFUL_RECORDS and len(warnings) == 1 and "holds only" in warnings[0]
    assert "default store" in capsys.readouterr().out  # the strict check ran on the built store
