"""The env in Gymnasium's Sync/Async vector envs and SB3's DummyVecEnv/SubprocVecEnv, and the
env checkers on the toy benchmark."""

from __future__ import annotations

import functools
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from cm_gym.envs.selection import MemorySelectionEnv
from tests.envs.toy_env import TOY_BENCHMARK, TOY_ENV_ID, make_toy


@pytest.mark.filterwarnings("ignore:.*Box observation space (minimum|maximum) value")
def test_env_checkers_pass(toy_store_path: Path) -> None:
    env = gym.make(TOY_ENV_ID, store=toy_store_path, tasks="all")
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(MemorySelectionEnv(benchmark=TOY_BENCHMARK, store=toy_store_path, tasks="all"), warn=True)


def _rollout_vector(envs: gym.vector.VectorEnv, steps: int = 12) -> list[np.ndarray]:
    obs, infos = envs.reset(seed=[3, 4])
    out = [obs.copy()]
    for _ in range(steps):
        masks = infos["action_mask"]
        actions = np.array([np.flatnonzero(m)[-1] for m in masks])  # highest valid slot
        obs, _, _, _, infos = envs.step(actions)
        out.append(obs.copy())
        assert obs.shape == (2, 98)
    envs.close()
    return out


def test_gymnasium_sync_and_async_agree(toy_store_path: Path) -> None:
    fns = [functools.partial(make_toy, str(toy_store_path)) for _ in range(2)]
    sync = _rollout_vector(gym.vector.SyncVectorEnv(fns))
    async_ = _rollout_vector(gym.vector.AsyncVectorEnv(fns, context="fork"))
    for a, b in zip(sync, async_, strict=True):
        np.testing.assert_array_equal(a, b)


def _rollout_sb3(venv: DummyVecEnv | SubprocVecEnv, steps: int = 12) -> tuple[list[np.ndarray], int]:
    venv.seed(7)
    obs = venv.reset()
    out, episodes = [obs.copy()], 0
    for _ in range(steps):
        masks = np.stack(venv.env_method("action_masks"))
        obs, _, dones, infos = venv.step(np.array([np.flatnonzero(m)[-1] for m in masks]))
        out.append(obs.copy())
        episodes += int(dones.sum())
        for done, info in zip(dones, infos, strict=True):
            if done:
                assert info["terminal_observation"].shape == (98,)
    venv.close()
    return out, episodes


def test_sb3_dummy_and_subproc_agree(toy_store_path: Path) -> None:
    fns = [functools.partial(make_toy, str(toy_store_path)) for _ in range(2)]
    dummy, n1 = _rollout_sb3(DummyVecEnv(fns))
    sub, n2 = _rollout_sb3(SubprocVecEnv(fns, start_method="fork"))
    assert n1 == n2 and n1 > 0
    for a, b in zip(dummy, sub, strict=True):
        np.testing.assert_array_equal(a, b)
