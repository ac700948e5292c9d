"""Issue 36: the default store is shared between ``gym.make`` and ``cm-gym run`` / ``train`` when
both build it from the same tasks and settings (the plain simulator on the default split): the
second one loads it from ``CM_GYM_CACHE`` instead of building it again (the quick start rebuilt,
in 36 s, the SQL store ``cm-gym run`` had just built). Builds are counted at `build_memory`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from cm_gym.memory import construction, defaults
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.protocol import ProtocolConfig
from cm_gym.protocol.stores import build_snapshot, prepare, shares_default_store
from tests.envs.toy_env import TOY_BENCHMARK, TOY_ENV_ID


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """A fresh CM_GYM_CACHE, and the build tasks of every `build_memory` call (either path)."""
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CM_GYM_PROGRESS", "0")
    monkeypatch.delenv("CM_GYM_QUICK", raising=False)
    calls: list[int] = []
    real: Callable[..., Any] = construction.build_memory

    def counted(domain: Any, tasks: list, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(tasks))
        return real(domain, tasks, *args, **kwargs)

    monkeypatch.setattr(construction, "build_memory", counted)  # the protocol imports it per call
    monkeypatch.setattr(defaults, "build_memory", counted)  # gym.make's default store
    return calls


def _cfg(out: Path, **kw: Any) -> ProtocolConfig:
    return ProtocolConfig(benchmark=TOY_BENCHMARK, out_dir=out, seeds=(0,), progress=False, **kw)


def _records(path: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return sorted(db.execute("SELECT * FROM records"))


def _make_env_store() -> Path:
    env = gym.make(TOY_ENV_ID)
    try:
        return Path(env.unwrapped.store_path)
    finally:
        env.close()


def test_cm_gym_run_loads_the_store_gym_make_built(builds: list[int], tmp_path: Path) -> None:
    made = _make_env_store()
    assert len(builds) == 1
    cfg = _cfg(tmp_path / "run")
    snapshot = build_snapshot(cfg, prepare(cfg, need=("build",)))
    assert len(builds) == 1  # loaded, not rebuilt
    assert snapshot == cfg.out_dir / "memory" / "snapshot.sqlite"  # the run folder stays complete
    assert _records(snapshot) == _records(made) and _records(made)
    assert FrozenStore.open(snapshot).processed_task_ids == FrozenStore.open(made).processed_task_ids
    summary = (cfg.out_dir / "memory" / "build_summary.json").read_text()
    assert str(made) in summary and '"tasks": ' in summary


def test_gym_make_loads_the_store_cm_gym_run_built(builds: list[int], tmp_path: Path) -> None:
    cfg = _cfg(tmp_path / "run")
    snapshot = build_snapshot(cfg, prepare(cfg, need=("build",)))
    assert len(builds) == 1
    made = _make_env_store()
    assert len(builds) == 1 and _records(made) == _records(snapshot)
    again = _cfg(tmp_path / "another-run")  # and a second run in another folder
    build_snapshot(again, prepare(again, need=("build",)))
    assert len(builds) == 1


def test_runs_with_other_settings_build_their_own_memory(builds: list[int], tmp_path: Path) -> None:
    """Another split seed or a cached simulator (its replies are recorded into the run's cache)
    are not what a default store holds: the run builds in its folder, as before."""
    _make_env_store()
    assert len(builds) == 1
    for name, kw in [("seed", {"split_seed": 7}), ("cached", {"llm_cache": tmp_path / "llm.sqlite"})]:
        cfg = _cfg(tmp_path / name, **kw)
        assert not shares_default_store(cfg)
        build_snapshot(cfg, prepare(cfg, need=("build",)))
        assert "default_store" not in (cfg.out_dir / "memory" / "build_summary.json").read_text()
    assert len(builds) == 3
    assert shares_default_store(_cfg(tmp_path / "x", n_build=5, retention="recent"))  # part of the key


def test_a_read_only_cache_without_the_store_builds_in_the_run_folder(
    builds: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sharing never makes a run need a writable cache it did not need before."""
    from cm_gym.core.paths import CacheError
    from cm_gym.protocol import stores

    def read_only(*args: Any, **kwargs: Any) -> Path:
        raise CacheError("the default store is not in the cache and cannot be built there")

    monkeypatch.setattr(stores, "_default_store", read_only)
    cfg = _cfg(tmp_path / "run")
    snapshot = build_snapshot(cfg, prepare(cfg, need=("build",)))
    assert len(builds) == 1 and (cfg.out_dir / "memory" / "store.sqlite").exists()
    assert FrozenStore.open(snapshot).processed_task_ids
