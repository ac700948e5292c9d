"""The field's learned selectors (issue 34): each rule does what its source says on hand-made
decisions, learns on a synthetic bandit, and trains and acts on the real selection env."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cm_gym.agents.linucb import LinUCB
from cm_gym.agents.memento_clf import MementoClassifier
from cm_gym.agents.memrl import MemRL
from cm_gym.agents.thompson import ThompsonSampling
from cm_gym.agents.zoo import LEARNED, make_learned
from cm_gym.envs import features as F
from tests.agents.conftest import GoodSlotEnv
from tests.envs.toy_env import build_toy_store, make_toy


def _obs(relevances: list[float]) -> tuple[np.ndarray, np.ndarray]:
    slots = [F.SlotFeatures(r, 0.5, 0.3, 0.0, 0, 0.0) for r in relevances]
    budget = F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0)
    obs = F.build_observation(None, None, slots, budget)
    return obs, F.mask_from_observation(obs)


def _context(n: int) -> dict[str, Any]:
    return {"record_ids": [f"r{j}" for j in range(1, n + 1)]}


def test_memrl_takes_the_null_action_below_delta() -> None:
    policy = MemRL()
    obs, mask = _obs([0.37, 0.30])
    assert policy.greedy(obs, mask, _context(2)) == 0
    assert policy.explore(obs, mask, _context(2)) == 0 and policy.null_actions == 1
    obs, mask = _obs([0.39, 0.30])
    assert policy.greedy(obs, mask, _context(2)) == 1
    obs, mask = _obs([])
    assert policy.explore(obs, mask, _context(0)) == 0 and policy.null_actions == 1  # nothing offered


def test_memrl_ranks_by_lambda_q_plus_similarity_after_the_filter() -> None:
    policy = MemRL()
    obs, mask = _obs([0.60, 0.40, 0.20])
    # slot 2 overtakes slot 1 when 0.5·Q2 + 0.5·0.40 > 0.5·Q1 + 0.5·0.60, i.e. Q2 − Q1 > 0.2
    policy.q = {"r1": 0.0, "r2": 0.19, "r3": 1.0}
    assert policy.ranked(obs, mask, _context(3)) == [1, 2]  # r3 is below δ whatever its Q
    policy.q["r2"] = 0.21
    assert policy.greedy(obs, mask, _context(3)) == 2
    policy.q["r2"] = -0.81  # below q_min: dropped
    assert policy.ranked(obs, mask, _context(3)) == [1]
    policy.q["r1"] = -0.9
    assert policy.greedy(obs, mask, _context(3)) == 0


def test_memrl_updates_each_used_record_once_per_task() -> None:
    policy = MemRL()
    obs, _ = _obs([0.6])
    info = {"solved": False}
    policy.observe(obs, 1, 0.0, info, _context(1))
    policy.observe(obs, 1, 0.0, info, _context(1))
    policy.end_episode({"solved": True})
    assert policy.q == {"r1": pytest.approx(0.3)}  # 0 + 0.3 (1 − 0)
    policy.observe(obs, 1, 0.0, info, _context(1))
    policy.end_episode({"solved": False})
    assert policy.q["r1"] == pytest.approx(0.3 + 0.3 * (-1 - 0.3))
    assert policy.visits == {"r1": 2}
    policy.observe(obs, 0, 0.0, info, _context(1))  # skip uses no record
    policy.end_episode({"solved": True})
    assert policy.visits == {"r1": 2}


def test_memrl_explores_among_the_kept_candidates() -> None:
    policy = MemRL(seed=3, epsilon=1.0)
    obs, mask = _obs([0.6, 0.5, 0.1])
    picks = {policy.explore(obs, mask, _context(3)) for _ in range(50)}
    assert picks == {1, 2}


@pytest.mark.parametrize("cls", [LinUCB, ThompsonSampling])
def test_bandits_learn_which_slot_pays(cls: type) -> None:
    """GoodSlotEnv: the slot with relevance 1.0 solves (+1), others cost 0.5, skip 0.1. Before
    training a bandit picks skip or slot 1 by the prior; after 600 decisions it must pick the
    good slot wherever there is one (a policy ignoring relevance gets about 1/n of them)."""
    env = GoodSlotEnv()
    policy = cls(seed=0)
    record = policy.fit(env, ["t"], total_decisions=600)
    assert record["decisions"] >= 600 and record["updates"]["use"] > 0
    hits = total = 0
    obs, _ = env.reset(seed=123)
    for _ in range(300):
        action, _ = policy.predict(obs)
        if env._good:
            total += 1
            hits += int(action) == env._good
        obs, _, term, trunc, _ = env.step(action)
        if term or trunc:
            obs, _ = env.reset()
    assert total > 50 and hits / total > 0.9
    assert env.invalid_actions == 0


def test_learned_registry_builds_every_selector() -> None:
    assert set(LEARNED) == {"memrl", "memq", "linucb", "thompson", "memento-clf"}
    for name in LEARNED:
        assert make_learned(name, seed=1).name == name
    with pytest.raises(KeyError, match="unknown learned selector"):
        make_learned("nope")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_toy_store(tmp_path_factory.mktemp("zoo") / "toy.sqlite"))


def test_decision_context_names_the_records_the_observation_shows(store: str) -> None:
    env = make_toy(store, task_order="sequential")
    obs, info = env.reset(seed=0)
    seen = 0
    for _ in range(30):
        context = env.unwrapped.decision_context(vectors=True)
        n_valid = int(F.mask_from_observation(obs)[1:].sum())
        assert context["record_ids"] == info["retrieved_ids"]
        assert len(context["record_ids"]) == n_valid == len(context["record_vectors"])
        assert all(v.shape == (F.PROJ_DIM,) for v in context["record_vectors"])
        reference = env.unwrapped._task.reference
        assert not reference or reference not in context["query"]
        seen += n_valid
        obs, _, term, trunc, info = env.step(1 if n_valid else 0)
        if term or trunc:
            obs, info = env.reset()
    assert seen > 0


@pytest.mark.parametrize("name", sorted(LEARNED))
def test_learned_selectors_train_and_act_on_the_selection_env(store: str, name: str) -> None:
    train_env = make_toy(store, task_order="sequential")
    eval_env = make_toy(store, task_order="sequential")
    tasks = [t.task_id for t in train_env.unwrapped.tasks]
    policy = make_learned(name, env=eval_env, seed=0)
    record = policy.fit(train_env, tasks, total_decisions=120)
    assert record["decisions"] >= 120 and record["episodes"] > 0
    obs, info = eval_env.reset(seed=0)
    for _ in range(40):
        action, _ = policy.predict(obs)
        assert info["action_mask"][int(action)]
        obs, _, term, trunc, info = eval_env.step(action)
        if term or trunc:
            obs, info = eval_env.reset()
    if name in ("memrl", "memq"):
        assert record["records_updated"] > 0
    if name == "memento-clf":
        assert record["pairs"] > 0


def test_context_policy_refuses_an_observation_of_another_env(store: str) -> None:
    env, other = make_toy(store, task_order="sequential"), make_toy(store, task_order="sequential")
    policy = MemRL(env=env)
    env.reset(seed=0)
    obs, _ = _obs([])
    with pytest.raises(ValueError, match="predict on the env"):
        for _ in range(20):  # some decision of env has a record while this observation has none
            policy.predict(obs)
            env.step(0)
    assert policy.bound_to(other).env is other and policy.env is env


def test_memento_classifier_learns_which_pairs_solve() -> None:
    """Synthetic pairs: the record solves when the slot's Δ feature is high. After fitting, the
    classifier ranks a high-Δ record above a low-Δ one in either slot order."""
    policy = MementoClassifier(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        delta = float(rng.random())
        obs = F.build_observation(None, None, [F.SlotFeatures(0.5, 0.5, delta, 0.0, 0, 0.0)],
                                  F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0))  # fmt: skip
        context = {"record_ids": ["r"], "record_vectors": [np.zeros(F.PROJ_DIM)]}
        policy.observe(obs, 1, 0.0, {"solved": delta > 0.5}, context)
    policy.finish_training()
    assert policy.stats()["fitted"]
    for order in ([0.9, 0.1], [0.1, 0.9]):
        obs = F.build_observation(None, None, [F.SlotFeatures(0.5, 0.5, d, 0.0, 0, 0.0) for d in order],
                                  F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0))  # fmt: skip
        context = {"record_ids": ["a", "b"], "record_vectors": [np.zeros(F.PROJ_DIM)] * 2}
        assert policy.greedy(obs, F.mask_from_observation(obs), context) == 1 + order.index(0.9)


def test_memento_classifier_keeps_retrieval_order_without_two_labels() -> None:
    policy = MementoClassifier()
    policy.finish_training()
    obs, mask = _obs([0.2, 0.9])
    assert not policy.stats()["fitted"]
    assert policy.greedy(obs, mask, {"record_ids": ["a", "b"]}) == 1
