"""The opt-in pair action space (two records at one decision): Discrete(17) over the same 98-dim
observation, masks consistent in all three places, REVISE_WITH_RECORDS on a pair, pair-aware
baselines and the masked DQN; the default space stays the paper's."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from cm_gym.agents.baselines import Oracle, RandomValid, TopOne, TopTwo
from cm_gym.agents.masked_dqn import MaskedDQN
from cm_gym.envs import features as F
from cm_gym.envs._actions import InvalidActionError
from cm_gym.llm.base import REVISE_WITH_RECORDS
from cm_gym.llm.prompts import parse_rendered, render
from tests.envs.toy_env import make_toy


def test_pair_helpers() -> None:
    assert len(F.PAIR_SLOTS) == 12 and len(set(F.PAIR_SLOTS)) == 12
    assert all(i != j for i, j in F.PAIR_SLOTS) and F.N_PAIR_ACTIONS == 17
    assert F.action_slots(0, "pairs") == () and F.action_slots(3, "pairs") == (3,)
    assert F.action_slots(F.pair_action(2, 1), "pairs") == (2, 1)
    with pytest.raises(ValueError):
        F.action_slots(5, "single")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=bool)
    wide = F.expand_pair_mask(mask)
    assert wide.shape == (3, 17) and (wide[:, :5] == mask).all()
    assert wide[0].sum() == 3 + 2 and wide[1].sum() == 2 and wide[2].sum() == 17
    assert (F.expand_pair_mask(torch.tensor(mask)).numpy() == wide).all()
    assert (F.mask_for(3, "pairs") == F.expand_pair_mask(F.mask_for(3))).all()


def _decide_until(env: gym.Env, want: int, seed0: int = 0) -> tuple[np.ndarray, dict]:
    """Reset until a decision with at least `want` retrieved records."""
    for seed in range(seed0, seed0 + 40):
        obs, info = env.reset(seed=seed)
        if info["n_retrieved"] >= want:
            return obs, info
    pytest.skip(f"no toy decision retrieved {want} records")


def test_pair_space_masks_and_step(toy_store_path: Path) -> None:
    env = make_toy(str(toy_store_path), action_space="pairs", use_conditions=False)
    assert env.action_space == gym.spaces.Discrete(17) and env.observation_space.shape == (98,)
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        mask = env.action_masks()
        assert mask.shape == (17,) and (info["action_mask"] == mask).all()
        assert (F.mask_from_observation(obs, pairs=True) == mask).all()
        assert mask[F.N_ACTIONS :].sum() == info["n_retrieved"] * (info["n_retrieved"] - 1)
    obs, info = _decide_until(env, 2)
    ids = info["retrieved_ids"]
    _, _, _, _, step = env.step(F.pair_action(2, 1))
    assert step["pair_use"] and step["record_id"] == f"{ids[1]}+{ids[0]}" and not step["invalid_action"]
    assert step["decision_cost"]["llm_calls"] >= 2  # the draft and the two-record revision
    obs, info = _decide_until(env, 1)
    if info["n_retrieved"] < 4:
        _, _, _, _, step = env.step(F.pair_action(1, 4))  # slot 4 is empty: masked, runs as skip
        assert step["invalid_action"] and step["record_id"] is None and not step["pair_use"]
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(17)
    check_env(make_toy(str(toy_store_path), action_space="pairs").unwrapped, skip_render_check=True)


def test_default_space_and_observations_are_the_papers(toy_store_path: Path) -> None:
    single = make_toy(str(toy_store_path), task_order="sequential")
    pairs = make_toy(str(toy_store_path), task_order="sequential", action_space="pairs")
    assert single.action_space == gym.spaces.Discrete(5)
    for seed in range(5):
        (o1, i1), (o2, i2) = single.reset(seed=seed), pairs.reset(seed=seed)
        assert (o1 == o2).all() and i1["retrieved_ids"] == i2["retrieved_ids"]
        assert (F.expand_pair_mask(i1["action_mask"]) == i2["action_mask"]).all()
        while True:
            a = 1 if i1["action_mask"][1] else 0
            o1, r1, t1, _, i1 = single.step(a)
            o2, r2, t2, _, i2 = pairs.step(a)  # singles keep their indices in the pair space
            assert (o1 == o2).all() and r1 == r2 and i1["action"] == i2["action"]
            if t1:
                break


def test_pair_baselines_and_oracle(toy_store_path: Path) -> None:
    env = make_toy(str(toy_store_path), action_space="pairs", use_conditions=False)
    obs, info = _decide_until(env, 2)
    assert int(TopTwo().predict(obs)[0]) == F.pair_action(1, 2)
    assert int(TopOne(action_space="pairs").predict(obs)[0]) == 1
    rnd = RandomValid(seed=3, action_space="pairs")
    picks = {int(rnd.predict(obs)[0]) for _ in range(200)}
    assert picks <= set(np.flatnonzero(info["action_mask"])) and any(p >= F.N_ACTIONS for p in picks)
    oracle = Oracle(env, action_space="pairs")
    best = int(oracle.predict(obs)[0])
    assert oracle.peeks == int(info["action_mask"].sum())  # every valid single and pair was peeked
    score = env.unwrapped.peek(best).score
    assert all(env.unwrapped.peek(int(a)).score <= score for a in np.flatnonzero(info["action_mask"]))
    with pytest.raises(ValueError):
        TopTwo(action_space="single")


@pytest.mark.slow
def test_masked_dqn_trains_and_acts_validly_on_pairs(toy_store_path: Path, tmp_path: Path) -> None:
    env = make_toy(str(toy_store_path), action_space="pairs", use_conditions=False)
    model = MaskedDQN("MlpPolicy", env, seed=0, learning_starts=16, train_freq=4)
    model.learn(64)
    assert model.policy.pairs and model.policy.q_net.pairs
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        for deterministic in (True, False):
            action = int(model.predict(obs, deterministic=deterministic)[0])
            assert info["action_mask"][action]
    model.save(tmp_path / "pairs.zip")
    loaded = MaskedDQN.load(tmp_path / "pairs.zip", env=env, device="cpu")
    assert loaded.policy.pairs and loaded.action_space.n == 17


def test_revise_with_records_prompt_round_trips() -> None:
    fields = {
        "task_id": "t1",
        "draft": "SELECT a FROM t WHERE x > 3",
        "record_id": "r1+r2",
        "record_1": "first",
        "record_1_a_minus": "x > 1",
        "record_1_a_plus": "x >= 1",
        "record_2": "second",
        "record_2_a_minus": "SELECT a",
        "record_2_a_plus": "SELECT DISTINCT a",
    }
    rendered = render(REVISE_WITH_RECORDS, fields)
    name, parsed = parse_rendered(rendered.messages)
    assert name == REVISE_WITH_RECORDS
    assert all(parsed[k] == v for k, v in fields.items())


def test_slot_limit_wrapper_masks_pairs(toy_store_path: Path) -> None:
    from cm_gym.envs.wrappers.ablation import SlotLimit

    env = SlotLimit(make_toy(str(toy_store_path), action_space="pairs", use_conditions=False), n_slots=1)
    obs, info = _decide_until(env, 1)
    mask = env.action_masks()
    assert mask.shape == (17,) and (info["action_mask"] == mask).all() and not mask[F.N_ACTIONS :].any()
    _, _, _, _, step = env.step(F.pair_action(1, 2))  # a pair needs slot 2, which the wrapper hides
    assert step["invalid_action"] and not step["pair_use"]
