"""Selectors on the real MemorySelectionEnv (toy benchmark): MaskedDQN never takes a masked slot,
sb3-contrib's MaskablePPO trains through `action_masks()`, baselines and the oracle run."""

from __future__ import annotations

import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.vec_env import DummyVecEnv

from cm_gym.agents import AlwaysSkip, MaskedDQN, Oracle, TopOne
from cm_gym.envs.wrappers import EpisodeMetrics
from tests.envs.toy_env import build_toy_store, make_toy


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_toy_store(tmp_path_factory.mktemp("agents") / "toy.sqlite"))


def test_masked_dqn_trains_on_the_env_without_invalid_actions(store: str) -> None:
    env = EpisodeMetrics(make_toy(store))
    model = MaskedDQN(env=env, seed=0, learning_starts=50, exploration_initial_eps=1.0)
    model.learn(total_timesteps=300)
    episodes = list(env.episodes)
    assert sum(e["decisions"] for e in episodes) >= 250
    assert sum(e["invalid_actions"] for e in episodes) == 0
    assert sum(e["selected_uses"] for e in episodes) > 0  # it did try records, not only skip


def test_maskable_ppo_trains_through_action_masks(store: str) -> None:
    venv = DummyVecEnv([lambda: EpisodeMetrics(make_toy(store))])
    model = MaskablePPO("MlpPolicy", venv, n_steps=64, batch_size=32, n_epochs=2, seed=0)
    model.learn(total_timesteps=128)
    obs = venv.reset()
    for _ in range(20):
        masks = get_action_masks(venv)
        action, _ = model.predict(obs, action_masks=masks, deterministic=False)
        assert masks[0, int(action[0])]
        obs, _, _, infos = venv.step(action)
        assert not infos[0]["invalid_action"]


@pytest.mark.parametrize("policy_name", ["none", "top1", "oracle"])
def test_baselines_run_full_episodes(store: str, policy_name: str) -> None:
    env = EpisodeMetrics(make_toy(store, task_order="sequential"))
    policy = {"none": AlwaysSkip(), "top1": TopOne(), "oracle": Oracle(env)}[policy_name]
    obs, _ = env.reset(seed=0)
    while len(env.episodes) < 20:
        action, _ = policy.predict(obs)
        obs, _, term, trunc, _ = env.step(action)
        if term or trunc:
            obs, _ = env.reset()
    summary = env.summary()
    assert summary["n_tasks"] == 20 and summary["invalid_actions"] == 0
    if policy_name == "none":
        assert summary["selected_uses"] == 0
    if policy_name == "top1":
        assert summary["selected_uses"] > 0


def test_oracle_is_an_upper_bound(store: str) -> None:
    scores = {}
    for name in ("none", "top1", "oracle"):
        env = EpisodeMetrics(make_toy(store, task_order="sequential"))
        policy = {"none": AlwaysSkip(), "top1": TopOne(), "oracle": Oracle(env)}[name]
        obs, _ = env.reset(seed=0)
        while len(env.episodes) < 20:
            obs, _, term, trunc, _ = env.step(policy.predict(obs)[0])
            if term or trunc:
                obs, _ = env.reset()
        scores[name] = env.summary()["score"]
    assert scores["oracle"] >= max(scores["none"], scores["top1"])
    assert scores["oracle"] > scores["none"]  # the toy store does hold a useful record


def test_custom_loop_with_info_mask(store: str) -> None:
    """A plain loop needs nothing but Gymnasium: read info["action_mask"] and pick a valid slot."""
    env = make_toy(store)
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    for _ in range(30):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, term, trunc, info = env.step(action)
        assert not info["invalid_action"]
        if term or trunc:
            obs, info = env.reset()
