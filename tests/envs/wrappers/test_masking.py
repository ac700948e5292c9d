"""Mask bridges: the Dict(observations, action_mask) wrapper (RLlib / TorchRL / Tianshou) and
`action_masks()` through standard Gymnasium and SB3 wrappers (MaskablePPO)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env as gym_check_env
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.env_util import make_vec_env

from cm_gym.envs import features as F
from cm_gym.envs.wrappers import (
    ActionMaskObservation,
    EpisodeMetrics,
    FeatureAblation,
    SlotLimit,
    make_masked_env,
)
from tests.envs.toy_env import TOY_ENV_ID, build_toy_store, make_toy

torch.set_num_threads(1)  # a tiny MLP: one thread is faster than contending for the shared cores


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_toy_store(tmp_path_factory.mktemp("masking") / "toy.sqlite"))


class ExtraDims(gym.ObservationWrapper):
    """Stands in for a longer observation layout: appends 3 features."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        n = env.observation_space.shape[0] + 3
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (n,), np.float32)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return np.concatenate([obs, np.ones(3, np.float32)])

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()


def _check_episode(env: gym.Env, seed: int) -> list[np.ndarray]:
    obs, info = env.reset(seed=seed)
    masks = []
    while True:
        assert obs in env.observation_space
        np.testing.assert_array_equal(obs["action_mask"].astype(bool), info["action_mask"])
        np.testing.assert_array_equal(obs["action_mask"].astype(bool), env.get_wrapper_attr("action_masks")())
        masks.append(obs["action_mask"])
        action = int(np.flatnonzero(obs["action_mask"])[-1])
        obs, _, term, trunc, info = env.step(action)
        assert not info["invalid_action"]
        if term or trunc:
            return masks


@pytest.mark.filterwarnings("ignore:.*Box observation space (minimum|maximum) value")
@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_dict_observation_carries_the_mask(store: str) -> None:
    env = ActionMaskObservation(make_toy(store))
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"observations", "action_mask"}
    assert space["observations"].shape == (F.OBS_DIM,) and space["action_mask"] == gym.spaces.MultiBinary(5)
    gym_check_env(env, skip_render_check=True)
    masks = [m for seed in range(6) for m in _check_episode(env, seed)]
    assert any(m[1:].any() for m in masks) and any(not m[1:].all() for m in masks)
    boxed = ActionMaskObservation(make_toy(store), mask_space="box")
    obs, _ = boxed.reset(seed=0)
    assert obs["action_mask"].dtype == np.float32 and obs in boxed.observation_space


def test_observation_size_is_read_from_the_env_and_inner_masks_are_honoured(store: str) -> None:
    env = ActionMaskObservation(SlotLimit(ExtraDims(make_toy(store)), n_slots=1))
    assert env.observation_space["observations"].shape == (F.OBS_DIM + 3,)
    for seed in range(4):
        for mask in _check_episode(env, seed):
            assert not mask[2:].any()  # SlotLimit's narrower mask reaches the Dict
    with pytest.raises(ValueError, match="mask_space"):
        ActionMaskObservation(make_toy(store), mask_space="bool")


def test_env_creator_imports_cm_gym_and_passes_kwargs(store: str) -> None:
    env = make_masked_env({"env_id": TOY_ENV_ID, "store": store, "tasks": "all", "mask_space": "box"})
    obs, _ = env.reset(seed=0)
    assert env.observation_space["action_mask"].dtype == np.float32 and obs in env.observation_space
    assert env.unwrapped.store.path.name == "toy.sqlite"


def _stacked_wrappers(store: str, **_: Any) -> gym.Env:
    env = gym.make(TOY_ENV_ID, store=store, tasks="all")  # OrderEnforcing + PassiveEnvChecker
    env = gym.wrappers.TimeLimit(EpisodeMetrics(FeatureAblation(env, drop=("draft",))), max_episode_steps=5)
    return gym.wrappers.RecordEpisodeStatistics(env)


def test_action_masks_reach_maskable_ppo_through_standard_wrappers(store: str) -> None:
    env = _stacked_wrappers(store)
    env.reset(seed=0)
    mask = env.get_wrapper_attr("action_masks")()  # the documented way through wrappers
    np.testing.assert_array_equal(mask, env.unwrapped.action_masks())
    venv = make_vec_env(_stacked_wrappers, n_envs=2, env_kwargs={"store": store}, seed=0)
    model = MaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    obs = venv.reset()
    for _ in range(12):
        masks = get_action_masks(venv)
        np.testing.assert_array_equal(masks, np.stack(venv.env_method("action_masks")))
        actions, _ = model.predict(obs, action_masks=masks, deterministic=False)
        assert masks[np.arange(2), actions].all()
        obs, _, _, infos = venv.step(actions)
        assert not any(i["invalid_action"] for i in infos)
    venv.close()
