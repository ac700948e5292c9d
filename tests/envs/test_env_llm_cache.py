"""The env's response cache (issue 11 item 1): ``llm_cache`` / ``llm_cache_mode`` kwargs, exact
replay in "ro", the default cache for a real endpoint, and the processes of an AsyncVectorEnv
writing one cache file at once."""

from __future__ import annotations

import functools
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from cm_gym.envs.selection import MemorySelectionEnv
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import CacheError, CacheMissError
from cm_gym.llm.openai_client import OpenAICompatibleLLM
from tests.envs.toy_env import TOY_BENCHMARK, make_toy


def _episodes(env: gym.Env, n: int = 6) -> list[tuple[float, ...]]:
    out = []
    obs, info = env.reset(seed=5)
    for _ in range(n):
        done = False
        while not done:
            action = int(np.flatnonzero(info["action_mask"])[-1])
            obs, reward, terminated, truncated, info = env.step(action)
            out.append((float(reward), float(obs.sum()), info["task_id"]))
            done = terminated or truncated
        obs, info = env.reset()
    return out


def test_env_records_then_replays_read_only(toy_store_path: Path, tmp_path: Path) -> None:
    cache = tmp_path / "llm.sqlite"
    live = MemorySelectionEnv(benchmark=TOY_BENCHMARK, store=toy_store_path, tasks="all", llm_cache=cache)
    assert isinstance(live.llm, CachedLLM) and live.llm.cache.mode == "rw"
    first = _episodes(live)
    assert live.llm.cache.writes > 0
    live.llm.cache.close()
    replay = MemorySelectionEnv(
        benchmark=TOY_BENCHMARK, store=toy_store_path, tasks="all", llm_cache=cache, llm_cache_mode="ro"
    )
    assert _episodes(replay) == first
    stats = replay.llm.stats()  # type: ignore[attr-defined]
    assert stats["misses"] == 0 and stats["hits"] > 0 and stats["live_calls"] == 0
    other_seed = MemorySelectionEnv(
        benchmark=TOY_BENCHMARK,
        store=toy_store_path,
        tasks="all",
        llm_cache=cache,
        llm_cache_mode="ro",
        llm_seed=9,
    )
    with pytest.raises(CacheMissError, match="DRAFT_ACTION of task"):
        other_seed.reset(seed=0)


def test_real_endpoint_is_cached_by_default(
    toy_store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "root"))
    monkeypatch.setenv("CM_GYM_MODEL", "m")
    env = MemorySelectionEnv(benchmark=TOY_BENCHMARK, store=toy_store_path, llm="openai", tasks="all")
    assert isinstance(env.llm, CachedLLM) and isinstance(env.llm.inner, OpenAICompatibleLLM)
    assert env.llm.cache.path == tmp_path / "root" / "llm" / "responses.sqlite"
    off = MemorySelectionEnv(
        benchmark=TOY_BENCHMARK, store=toy_store_path, llm="openai", tasks="all", llm_cache_mode="off"
    )
    assert isinstance(off.llm, OpenAICompatibleLLM)
    with pytest.raises(CacheError, match="does not exist"):
        MemorySelectionEnv(
            benchmark=TOY_BENCHMARK, store=toy_store_path, llm="openai", tasks="all", llm_cache_mode="ro",
            llm_cache=tmp_path / "absent.sqlite",
        )  # fmt: skip
    with pytest.raises(CacheError, match="mode"):
        MemorySelectionEnv(
            benchmark=TOY_BENCHMARK, store=toy_store_path, tasks="all", llm_cache_mode="append"
        )


def test_async_vector_env_processes_share_one_cache(toy_store_path: Path, tmp_path: Path) -> None:
    cache = tmp_path / "shared.sqlite"
    fns = [functools.partial(make_toy, str(toy_store_path), llm_cache=str(cache)) for _ in range(3)]
    envs = gym.vector.AsyncVectorEnv(fns, context="fork")
    obs, infos = envs.reset(seed=[1, 2, 3])
    for _ in range(10):
        actions = np.array([np.flatnonzero(m)[-1] for m in infos["action_mask"]])
        obs, _, _, _, infos = envs.step(actions)
    envs.close()
    with ResponseCache(cache, "ro") as shared:
        written = len(shared)
    assert written > 0
    # every call the three processes made is now replayable: a sync replay makes no miss
    replay = gym.vector.SyncVectorEnv(
        [
            functools.partial(make_toy, str(toy_store_path), llm_cache=str(cache), llm_cache_mode="ro")
            for _ in range(3)
        ]
    )
    obs, infos = replay.reset(seed=[1, 2, 3])
    for _ in range(10):
        actions = np.array([np.flatnonzero(m)[-1] for m in infos["action_mask"]])
        obs, _, _, _, infos = replay.step(actions)
    replay.close()
