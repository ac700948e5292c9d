"""MemQ (issue 34): MemRL's choice with TD(λ) credit over record provenance. Its constants, the
(γλ)^d credit on hand-made contexts with a `replaces` chain, its equality with MemRL where the
store has no links, and training and acting on the real selection env."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from cm_gym.agents import memq, memrl
from cm_gym.agents.memq import MemQ
from cm_gym.agents.memrl import MemRL
from cm_gym.agents.zoo import LEARNED, make_learned
from cm_gym.envs import features as F
from cm_gym.memory.store import RecordStore
from tests.envs.toy_env import TOY_BENCHMARK, _record, build_toy_store, make_toy

# -- the constants (module doc: where each comes from) --------------------------------------------


def test_memq_discount_gamma() -> None:
    assert memq.GAMMA == 0.5  # §5.3: the best γ on LiveCodeBench (single-turn tasks)


def test_memq_trace_decay_lambda() -> None:
    assert memq.TRACE_LAMBDA == 0.3  # §5.3: the best λ on LiveCodeBench


def test_memq_walks_the_whole_dag() -> None:
    assert memq.MAX_DEPTH is None  # no depth cap found


def test_memq_borrows_memrl_step_size_and_exploration() -> None:
    assert (memq.ALPHA, memq.EPSILON) == (memrl.ALPHA, memrl.EPSILON) == (0.3, 0.1)


def test_memq_borrows_memrl_locality_filter() -> None:
    assert (memq.DELTA, memq.K1, memq.K2) == (memrl.DELTA, memrl.K1, memrl.K2) == (0.38, 10, 5)


def test_memq_borrows_memrl_score_weights() -> None:
    assert memq.LAMBDA == memrl.LAMBDA == 0.5  # w_q = w_s


def test_memq_borrows_memrl_initial_q_and_floor() -> None:
    assert (memq.Q_INIT, memq.Q_MIN) == (memrl.Q_INIT, memrl.Q_MIN) == (0.0, -0.8)


def test_memq_borrows_memrl_rewards() -> None:
    assert (memq.SUCCESS_REWARD, memq.FAILURE_REWARD) == (1.0, -1.0)


def test_memq_defaults_are_the_constants() -> None:
    policy = MemQ()
    assert (policy.gamma, policy.trace_lambda, policy.max_depth) == (0.5, 0.3, None)
    assert (policy.alpha, policy.epsilon, policy.delta, policy.lam) == (0.3, 0.1, 0.38, 0.5)
    assert policy.name == "memq" and LEARNED["memq"] is MemQ
    assert isinstance(make_learned("memq", alpha=0.5), MemQ) and make_learned("memq", alpha=0.5).alpha == 0.5


# -- the update on hand-made contexts -------------------------------------------------------------


def _obs(n: int) -> np.ndarray:
    slots = [F.SlotFeatures(0.6, 0.5, 0.3, 0.0, 0, 0.0) for _ in range(n)]
    return F.build_observation(None, None, slots, F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0))


def _context(*records: tuple[str, str]) -> dict[str, Any]:
    """A decision offering these (record id, the id it replaces) in slot order."""
    return {
        "record_ids": [rid for rid, _ in records],
        "records": [{"record_id": rid, "replaces": parent} for rid, parent in records],
    }


def _use(policy: MemRL, context: dict[str, Any], slot: int, solved: bool) -> None:
    policy.observe(_obs(len(context["record_ids"])), slot, 0.0, {}, context)
    policy.end_episode({"solved": solved})


def test_credit_reaches_each_ancestor_with_weight_gamma_lambda_to_the_depth() -> None:
    """c replaces b, b replaces a: using c once on a solved task gives c α·δ, b α·(γλ)·δ and a
    α·(γλ)²·δ, where δ is c's TD error (R − Q(c)), not the ancestors' own."""
    policy = MemQ()
    policy.q["b"] = 0.5  # the ancestor's own Q does not enter its update
    context = _context(("c", "b"), ("b", "a"), ("x", ""))
    _use(policy, context, 1, solved=True)
    gl = 0.5 * 0.3
    assert policy.q["c"] == pytest.approx(0.3 * 1.0)
    assert policy.q["b"] == pytest.approx(0.5 + 0.3 * gl * 1.0)
    assert policy.q["a"] == pytest.approx(0.3 * gl**2 * 1.0)
    assert "x" not in policy.q and policy.visits == {"c": 1}  # ancestors are credited, not used
    assert policy.ancestry("c") == [("c", 0), ("b", 1), ("a", 2)]
    stats = policy.stats()
    assert (stats["provenance_edges"], stats["credit_propagated"], stats["ancestors_credited"]) == (2, 2, 2)
    assert stats["ancestor_credits"] == {"a": 1, "b": 1}
    # a failed use of c: δ = −1 − 0.3; the chain gets the same decay
    _use(policy, _context(("c", "b")), 1, solved=False)
    td = -1.0 - 0.3
    assert policy.q["c"] == pytest.approx(0.3 + 0.3 * td)
    assert policy.q["a"] == pytest.approx(0.3 * gl**2 * (1.0 + td))


def test_credit_uses_the_shortest_depth_and_sums_over_used_records() -> None:
    """A diamond (d → b → a and d → a): a is at depth 1, credited once per used descendant."""
    policy = MemQ(provenance={"d": ["b", "a"], "b": ["a"]}, gamma=1.0, trace_lambda=0.5)
    assert policy.ancestry("d") == [("d", 0), ("a", 1), ("b", 1)]
    policy.observe(_obs(2), 1, 0.0, {}, _context(("d", ""), ("b", "")))
    policy.observe(_obs(2), 2, 0.0, {}, _context(("d", ""), ("b", "")))
    policy.end_episode({"solved": True})
    # d: δ_d = 1 (Q 0): d += 0.3, b += 0.3·0.5, a += 0.3·0.5; b: δ_b = 1: b += 0.3, a += 0.3·0.5
    assert policy.q == pytest.approx({"d": 0.3, "b": 0.3 + 0.15, "a": 0.15 + 0.15})
    assert MemQ(provenance={"d": ["b"], "b": ["a"]}, max_depth=1).ancestry("d") == [("d", 0), ("b", 1)]


def test_without_links_memq_is_memrl() -> None:
    """On contexts with no `replaces` link, the same choices and outcomes give MemRL's values."""
    rng = np.random.default_rng(0)
    a, b = MemRL(seed=1), MemQ(seed=1)
    ids = [f"r{i}" for i in range(6)]
    for _ in range(200):
        n = int(rng.integers(1, 4))
        context = _context(*((str(rid), "") for rid in rng.choice(ids, n, replace=False)))
        for _ in range(int(rng.integers(1, 4))):
            slot = int(rng.integers(0, n + 1))
            for policy in (a, b):
                policy.observe(_obs(n), slot, 0.0, {}, context)
        solved = bool(rng.random() < 0.5)
        for policy in (a, b):
            policy.end_episode({"solved": solved})
    assert b.q == pytest.approx(a.q) and b.visits == a.visits and len(a.q) == len(ids)
    assert b.stats()["credit_propagated"] == 0 and b.stats()["provenance_edges"] == 0
    obs = _obs(3)
    mask = F.mask_from_observation(obs)
    context = _context(("r0", ""), ("r1", ""), ("r2", ""))
    assert a.ranked(obs, mask, context) == b.ranked(obs, mask, context)


# -- on the real selection env ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def linked_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The toy records with a provenance link: the unconditioned fix replaces the guarded one
    (both live, so both can be retrieved and the link can carry credit)."""
    path = tmp_path_factory.mktemp("memq") / "linked.sqlite"
    store = RecordStore(path.with_suffix(".live.sqlite"), domain="toycmp", benchmark=TOY_BENCHMARK)
    parent = _record("toy-000", "x > 4", "x >= 4", "toy_inclusive()", "values at least k: include k", 0)
    child = _record("toy-002", "x > 2", "x >= 2", "", "values at least k boundary include", 1)
    store.add(parent)
    store.add(replace(child, replaces=parent.record_id))
    store.add(_record("toy-001", "x >= 6", "x > 6", "", "values more than k: exclude the boundary", 2))
    store.freeze(path)
    store.close()
    return str(path)


def test_memq_trains_and_acts_on_the_selection_env(linked_store: str) -> None:
    train_env = make_toy(linked_store, task_order="sequential")
    eval_env = make_toy(linked_store, task_order="sequential")
    tasks = [t.task_id for t in train_env.unwrapped.tasks]
    policy = MemQ(env=eval_env, seed=0, delta=0.0, epsilon=1.0)  # use records, every one in turn
    record = policy.fit(train_env, tasks, total_decisions=120)
    assert record["decisions"] >= 120 and record["records_updated"] > 0
    assert record["provenance_edges"] == 1 and record["credit_propagated"] > 0
    assert record["exploration"]["gamma"] == 0.5 and record["exploration"]["trace_lambda"] == 0.3
    obs, info = eval_env.reset(seed=0)
    for _ in range(30):
        action, _ = policy.predict(obs)
        assert info["action_mask"][int(action)]
        obs, _, term, trunc, info = eval_env.step(action)
        if term or trunc:
            obs, info = eval_env.reset()


def test_on_a_store_without_links_memq_learns_memrls_values(tmp_path_factory: pytest.TempPathFactory) -> None:
    store = str(build_toy_store(tmp_path_factory.mktemp("memq-plain") / "toy.sqlite"))
    records = []
    for cls in (MemRL, MemQ):
        env = make_toy(store, task_order="sequential")
        policy = cls(env=env, seed=0, delta=0.0)
        records.append(policy.fit(env, [t.task_id for t in env.unwrapped.tasks], total_decisions=80))
    by_memrl, by_memq = records
    assert by_memq["records_updated"] > 0 and by_memq["provenance_edges"] == 0
    assert by_memq["q"] == by_memrl["q"] and by_memq["visits"] == by_memrl["visits"]
