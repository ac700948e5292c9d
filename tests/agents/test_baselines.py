"""Baseline selectors: SB3-like predict, masks respected, oracle peeks and picks the best option."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from cm_gym.agents import BASELINES, AlwaysSkip, Oracle, RandomValid, TopOne
from cm_gym.envs import features as F

from .conftest import GoodSlotEnv


def _obs(n_valid: int) -> np.ndarray:
    slots = [F.SlotFeatures(0.5, 0.1, 0.2, 0.0, 0, 0.0) for _ in range(n_valid)]
    return F.build_observation(None, None, slots, F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0))


BATCH = np.stack([_obs(n) for n in (0, 1, 2, 3)])


def test_always_skip() -> None:
    actions, state = AlwaysSkip().predict(BATCH)
    assert actions.tolist() == [0, 0, 0, 0] and state is None
    single, _ = AlwaysSkip().predict(_obs(3))
    assert single.shape == () and int(single) == 0


def test_top_one_uses_slot_one_only_when_valid() -> None:
    actions, _ = TopOne().predict(BATCH)
    assert actions.tolist() == [0, 1, 1, 1]


def test_random_valid_is_seeded_and_valid() -> None:
    big = np.tile(BATCH, (50, 1))
    a1, _ = RandomValid(seed=3).predict(big)
    a2, _ = RandomValid(seed=3).predict(big)
    np.testing.assert_array_equal(a1, a2)
    mask = F.mask_from_observation(big)
    assert mask[np.arange(len(big)), a1].all()
    assert set(a1[3::4].tolist()) == {0, 1, 2, 3}  # rows with 3 valid slots reach every option
    assert set(a1[0::4].tolist()) == {0}


def test_oracle_picks_the_good_slot_by_peeking() -> None:
    env = GoodSlotEnv()
    oracle = Oracle(env)
    obs, _ = env.reset(seed=0)
    for _ in range(50):
        action, _ = oracle.predict(obs)
        expected = env._good if env._good else 0
        assert int(action) == expected
        obs, _, term, trunc, _ = env.step(int(action))
        if term or trunc:
            obs, _ = env.reset()
    assert env.peeks == oracle.peeks > 50


def test_oracle_ties_go_to_skip() -> None:
    class Flat(GoodSlotEnv):
        def peek(self, action: int):  # every option equally good
            from cm_gym.core.types import Outcome

            return Outcome(score=0.5, solved=False)

    env = Flat()
    obs, _ = env.reset(seed=1)
    assert int(Oracle(env).predict(obs)[0]) == 0


def test_oracle_over_a_vec_env_peeks_each_sub_env() -> None:
    venv = DummyVecEnv([GoodSlotEnv, GoodSlotEnv])
    venv.seed(5)
    obs = venv.reset()
    actions, _ = Oracle(venv).predict(obs)
    goods = venv.get_attr("_good")
    assert actions.tolist() == [g if g else 0 for g in goods]


def test_oracle_refuses_batch_on_single_env() -> None:
    env = GoodSlotEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="batch"):
        Oracle(env).predict(BATCH)


def test_registry_names() -> None:
    assert set(BASELINES) == {"none", "top1", "random", "oracle"}
