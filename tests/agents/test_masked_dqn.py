"""MaskedDQN: masking in greedy / exploring / warm-up actions and in the TD target; learning;
save/load and refusal of a checkpoint for another observation size."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3 import DQN
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv

from cm_gym.agents import TABLE3, MaskedDQN, masked_max, random_valid_actions
from cm_gym.agents.policies import MaskedDQNPolicy
from cm_gym.envs import features as F
from cm_gym.envs.features import ObservationLayoutError

from .conftest import GoodSlotEnv


def _obs_with_valid(n_valid: int) -> np.ndarray:
    slots = [F.SlotFeatures(0.5, 0.1, 0.2, 0.0, 0, 0.0) for _ in range(n_valid)]
    return F.build_observation(None, None, slots, F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0))


def test_table3_defaults_are_applied(good_slot_env: GoodSlotEnv) -> None:
    model = MaskedDQN(env=good_slot_env, seed=0)
    assert model.learning_rate == 1e-3 and model.gamma == 0.95 and model.batch_size == 32
    assert model.learning_starts == 100 and model.target_update_interval == 250
    assert model.buffer_size == 10_000 and model.exploration_initial_eps == 0.30
    assert model.exploration_final_eps == 0.05
    assert model.policy.optimizer.defaults["eps"] == 1e-8
    linear = [m for m in model.q_net.q_net if isinstance(m, th.nn.Linear)]
    assert [m.out_features for m in linear] == [64, 64, 5]
    assert any(isinstance(m, th.nn.ReLU) for m in model.q_net.q_net)
    assert TABLE3["train_freq"] == 4


def test_greedy_action_never_masked_even_when_masked_q_is_largest(good_slot_env: GoodSlotEnv) -> None:
    model = MaskedDQN(env=good_slot_env, seed=0)
    # make the Q of the last slot (always masked with <=3 valid slots) hugely attractive
    last = model.q_net.q_net[-1]
    with th.no_grad():
        last.bias[:] = th.tensor([0.0, 1.0, 2.0, 3.0, 100.0])
    for n_valid in range(4):
        action, _ = model.predict(_obs_with_valid(n_valid), deterministic=True)
        assert int(action) == n_valid  # highest *valid* slot (bias grows with the index)
        assert F.mask_from_observation(_obs_with_valid(n_valid))[int(action)]
    batch = np.stack([_obs_with_valid(n) for n in (0, 1, 2, 3)])
    actions, _ = model.predict(batch, deterministic=True)
    assert actions.tolist() == [0, 1, 2, 3]


def test_exploration_draws_only_valid_actions(good_slot_env: GoodSlotEnv) -> None:
    model = MaskedDQN(env=good_slot_env, seed=0)
    model.exploration_rate = 1.0
    np.random.seed(0)
    obs = _obs_with_valid(2)
    seen = {int(model.predict(obs, deterministic=False)[0]) for _ in range(300)}
    assert seen == {0, 1, 2}
    only_skip = {int(model.predict(_obs_with_valid(0), deterministic=False)[0]) for _ in range(50)}
    assert only_skip == {0}


def test_warmup_and_training_never_take_masked_actions() -> None:
    env = GoodSlotEnv()
    model = MaskedDQN(
        env=env, seed=1, learning_starts=200, exploration_initial_eps=1.0, exploration_final_eps=0.5
    )
    model.learn(total_timesteps=600)
    assert len(env.actions_taken) == 600
    assert env.invalid_actions == 0
    # warm-up actually explored the valid slots, not only skip
    assert len(set(env.actions_taken[:200])) >= 3


def test_plain_dqn_does_take_masked_actions() -> None:
    """Control for the test above: the synthetic env does detect masked actions."""
    env = GoodSlotEnv()
    DQN("MlpPolicy", env, seed=1, learning_starts=200).learn(total_timesteps=300)
    assert env.invalid_actions > 0


def test_masked_max_ignores_masked_slots() -> None:
    q = th.tensor([[0.0, 5.0, 9.0, -1.0, 50.0], [-2.0, -1.0, -3.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    mask = th.tensor(
        [
            [True, True, False, False, False],
            [True, False, False, False, False],
            [True, True, True, True, True],
        ]
    )
    assert masked_max(q, mask).tolist() == [5.0, -2.0, 5.0]
    assert th.isfinite(masked_max(q, mask)).all()


def test_train_target_uses_masked_max(good_slot_env: GoodSlotEnv) -> None:
    """One gradient step from a crafted replay sample: the TD target must use the best *valid*
    next Q (skip), not the masked slot's large Q, and the taken masked-or-not action's Q is kept."""
    model = MaskedDQN(env=good_slot_env, seed=0, learning_rate=0.0, batch_size=1, gamma=0.5)
    model.set_logger(configure(None, []))
    target_last = model.q_net_target.q_net[-1]
    with th.no_grad():
        for p in model.q_net_target.parameters():
            p.zero_()
        target_last.bias[:] = th.tensor([1.0, 2.0, 30.0, 40.0, 50.0])  # only skip & slot 1 valid below
    obs = _obs_with_valid(1)
    model.replay_buffer.add(
        obs[None], _obs_with_valid(1)[None], np.array([[1]]), np.array([0.25]), np.array([False]), [{}]
    )
    captured: dict[str, th.Tensor] = {}
    original = th.nn.functional.mse_loss

    def spy(current: th.Tensor, target: th.Tensor) -> th.Tensor:
        captured["target"] = target.detach().clone()
        return original(current, target)

    th.nn.functional.mse_loss = spy  # type: ignore[assignment]
    try:
        model.train(gradient_steps=1, batch_size=1)
    finally:
        th.nn.functional.mse_loss = original  # type: ignore[assignment]
    # r + γ · max(valid Q) = 0.25 + 0.5 · max(1, 2) = 1.25 (unmasked max would give 25.25)
    assert captured["target"].item() == pytest.approx(1.25)


@pytest.mark.slow
def test_learns_the_good_slot() -> None:
    env = GoodSlotEnv()
    model = MaskedDQN(env=env, seed=0, exploration_fraction=0.3)
    model.learn(total_timesteps=3000)
    eval_env = GoodSlotEnv()
    obs, _ = eval_env.reset(seed=123)
    hits = total = 0
    for _ in range(400):
        action, _ = model.predict(obs, deterministic=True)
        if eval_env._good:
            total += 1
            hits += int(action) == eval_env._good
        obs, _, term, trunc, _ = eval_env.step(int(action))
        if term or trunc:
            obs, _ = eval_env.reset()
    assert total > 100 and hits / total > 0.9
    assert eval_env.invalid_actions == 0


def test_save_load_roundtrip(tmp_path: Path, good_slot_env: GoodSlotEnv) -> None:
    model = MaskedDQN(env=good_slot_env, seed=0)
    model.learn(total_timesteps=150)
    path = tmp_path / "selector.zip"
    model.save(path)
    loaded = MaskedDQN.load(path, env=GoodSlotEnv())
    assert isinstance(loaded.policy, MaskedDQNPolicy)
    assert loaded.policy.validity_indices == F.VALIDITY_INDICES
    batch = np.stack([_obs_with_valid(n) for n in (0, 1, 2, 3)])
    np.testing.assert_array_equal(
        model.predict(batch, deterministic=True)[0], loaded.predict(batch, deterministic=True)[0]
    )
    assert loaded.gamma == 0.95 and loaded.loss == "mse"


def test_refuses_checkpoint_for_other_observation_size(tmp_path: Path, good_slot_env: GoodSlotEnv) -> None:
    path = tmp_path / "selector.zip"
    MaskedDQN(env=good_slot_env, seed=0).save(path)
    small = gym.spaces.Box(-np.inf, np.inf, (50,), np.float32)
    with pytest.raises(ObservationLayoutError, match=r"\(98,\).*\(50,\)"):
        MaskedDQN.load(path, observation_space=small)
    with pytest.raises(ObservationLayoutError, match=r"\(98,\).*\(50,\)"):
        MaskedDQN.load(path, expected_obs_dim=50)  # no env: checked against the expected size

    class SmallEnv(GoodSlotEnv):
        def __init__(self) -> None:
            super().__init__()
            self.observation_space = small

    with pytest.raises(ObservationLayoutError, match="shape"):
        MaskedDQN.load(path, env=DummyVecEnv([SmallEnv]))


def test_refuses_plain_dqn_checkpoint(tmp_path: Path, good_slot_env: GoodSlotEnv) -> None:
    path = tmp_path / "plain.zip"
    DQN("MlpPolicy", good_slot_env).save(path)
    with pytest.raises(ObservationLayoutError, match="not a MaskedDQNPolicy"):
        MaskedDQN.load(path)


def test_policy_refuses_layout_that_does_not_fit() -> None:
    env = GoodSlotEnv()
    env.observation_space = gym.spaces.Box(-np.inf, np.inf, (40,), np.float32)
    with pytest.raises(ObservationLayoutError, match="outside"):
        MaskedDQN(env=env)


def test_random_valid_actions_respects_mask() -> None:
    mask = np.array([[True, False, True, False, False], [True, False, False, False, False]])
    rng = np.random.default_rng(0)
    draws = np.stack([random_valid_actions(mask, rng) for _ in range(100)])
    assert set(draws[:, 0].tolist()) == {0, 2}
    assert set(draws[:, 1].tolist()) == {0}
