"""EpisodeMetrics (SPEC §8 counters at episode end) and the selector-side ablation wrappers."""

from __future__ import annotations

import numpy as np
import pytest

from cm_gym.envs import features as F
from cm_gym.envs.wrappers import FEATURE_GROUPS, EpisodeMetrics, FeatureAblation, SlotLimit
from tests.envs.toy_env import build_toy_store, make_toy


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_toy_store(tmp_path_factory.mktemp("wrappers") / "toy.sqlite"))


def test_episode_metrics_accumulate_and_appear_at_episode_end(store: str) -> None:
    env = EpisodeMetrics(make_toy(store))
    obs, info = env.reset(seed=4)
    steps, tokens, calls, uses = 0, 0, 0, 0
    while True:
        action = 1 if info["action_mask"][1] else 0
        obs, reward, term, trunc, info = env.step(action)
        steps += 1
        tokens += info["decision_cost"]["tokens"]
        calls += info["decision_cost"]["evaluator_calls"]
        uses += info["record_id"] is not None
        if term or trunc:
            break
        assert "episode_metrics" not in info
    m = info["episode_metrics"]
    assert m["decisions"] == steps and m["tokens"] == tokens and m["evaluator_calls"] == calls
    assert m["selected_uses"] == uses and m["solved"] == info["solved"]
    assert m["retrieval_opportunities"] == steps
    assert m["task_id"] == info["task_id"] and len(env.episodes) == 1
    assert env.summary()["n_tasks"] == 1
    np.testing.assert_array_equal(env.action_masks(), env.unwrapped.action_masks())


def test_feature_ablation_hides_groups_but_keeps_the_mask(store: str) -> None:
    env = FeatureAblation(make_toy(store), drop=("reuse_statistics", "draft"))
    obs, info = env.reset(options={"task_id": "toy-004"})
    assert not obs[F.DRAFT].any()
    for j in range(1, 5):
        s = obs[F.slot(j)]
        assert s[3] == s[4] == s[5] == 0.0
    np.testing.assert_array_equal(F.mask_from_observation(obs), info["action_mask"])
    assert F.mask_from_observation(obs)[1]
    assert "validity" not in FEATURE_GROUPS
    with pytest.raises(ValueError, match="unknown feature group"):
        FeatureAblation(make_toy(store), drop=("validity",))


def test_slot_limit_masks_later_slots(store: str) -> None:
    env = SlotLimit(make_toy(store), n_slots=1)
    obs, info = env.reset(options={"task_id": "toy-004"})
    assert info["action_mask"].tolist()[:3] == [True, True, False]
    assert not obs[F.slot(2)].any()
    np.testing.assert_array_equal(env.action_masks(), info["action_mask"])
    _, _, _, _, info = env.step(2)
    assert info["invalid_action"] and info["record_id"] is None
