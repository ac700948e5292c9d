"""The env in Gymnasium's Sync/Async vector envs and SB3's DummyVecEnv/SubprocVecEnv (on the toy
benchmark, and on ``cm_gym/SQL-v0`` with every library's *default* arguments), and the env checkers."""

from __future__ import annotations

import functools
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.env_util import make_vec_env
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


def _masked_steps(venv: DummyVecEnv | SubprocVecEnv, steps: int = 4) -> np.ndarray:
    obs = venv.reset()
    for _ in range(steps):
        masks = np.stack(venv.env_method("action_masks"))  # through Monitor: get_wrapper_attr
        obs, rewards, _, _ = venv.step(np.array([np.flatnonzero(m)[-1] for m in masks]))
        assert np.isfinite(rewards).all()
    return obs


@pytest.mark.slow
def test_sb3_make_vec_env_with_defaults() -> None:
    """The issue's line, with SB3's defaults: ``render_mode="rgb_array"``, forkserver workers that
    never imported cm_gym (they get it from the forkserver preload), the default store."""
    sub = make_vec_env("cm_gym/SQL-v0", n_envs=2, vec_env_cls=SubprocVecEnv, seed=0)
    dummy = make_vec_env("cm_gym/SQL-v0", n_envs=2, seed=0)
    try:
        np.testing.assert_array_equal(_masked_steps(sub), _masked_steps(dummy))
        frames = dummy.get_images()
        assert frames[0].ndim == 3 and frames[0].dtype == np.uint8
        copy = pickle.loads(pickle.dumps(dummy.envs[0]))  # the SQL domain's lambdas stay behind
        obs, _ = copy.reset(seed=1)
        assert obs.shape == (98,) and copy.get_wrapper_attr("action_masks")()[0]
    finally:
        sub.close()
        dummy.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_make_vec_with_defaults(mode: str) -> None:
    envs = gym.make_vec("cm_gym/SQL-v0", num_envs=2, vectorization_mode=mode)
    try:
        obs, infos = envs.reset(seed=[0, 1])
        assert obs.shape == (2, 98) and infos["action_mask"].shape == (2, 5)
        obs, rewards, _, _, infos = envs.step(np.zeros(2, dtype=np.int64))
        assert obs.shape == (2, 98) and np.isfinite(rewards).all()
    finally:
        envs.close()
