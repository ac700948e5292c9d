"""The transition memo replays exactly the decision it skips (`cm_gym.envs._transitions`, issue 35).

Each test runs the same decisions through an env that memoises decisions and one that cannot (an
LLM wrapper that does not say its replies are pure) and asks for identical observations, rewards,
terminations, infos, agent marks and episode states, so a memo that replays a stale, shared or
mis-keyed value fails here; and checks that the memo did replay (fewer LLM and world-model calls).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

import cm_gym  # noqa: F401  (registers the benchmarks)
from cm_gym.core.types import Outcome
from cm_gym.envs import _transitions
from cm_gym.envs.selection import MemorySelectionEnv
from cm_gym.llm.base import Completion
from cm_gym.llm.simulated import SimulatedLLM
from tests.envs.opaque_llm import OpaqueLLM


def _counting(env: MemorySelectionEnv) -> dict[str, int]:
    """Count the env's LLM replies and world-model checks (instance attributes shadow the methods;
    the LLM still says its replies are pure)."""
    counts = {"llm": 0, "check": 0}
    llm, evaluator = env._agent.llm, env._agent.evaluator
    complete, check = llm.complete, evaluator.check

    def counted_complete(template: str, fields: Mapping[str, Any]) -> Completion:
        counts["llm"] += 1
        return complete(template, fields)

    def counted_check(state: Any, action: Any) -> Outcome:
        counts["check"] += 1
        return check(state, action)

    llm.complete = counted_complete
    evaluator.check = counted_check
    return counts


def _plain(info: Mapping[str, Any]) -> str:
    return json.dumps({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()},
                      sort_keys=True, default=str)  # fmt: skip


def _trace(env: MemorySelectionEnv, task_ids: list[str], policy: Callable[[int, int, np.ndarray], int],
           rounds: int = 3) -> list[Any]:  # fmt: skip
    """Every task in turn, `rounds` times: reset to it, then `policy(round, decision, mask)` to the
    episode's end, recording everything the env returns and the episode state it keeps."""
    out: list[Any] = []
    for r in range(rounds):
        for task_id in task_ids:
            obs, info = env.reset(seed=r, options={"task_id": task_id})
            out.append([obs.tolist(), _plain(info)])
            done, t = False, 0
            while not done:
                action = policy(r, t, info["action_mask"])
                obs, reward, term, trunc, info = env.step(action)
                state = env._state
                assert state is not None
                out.append([action, float(reward), term, trunc, obs.tolist(), _plain(info), state.render(),
                            env._agent.marks(), sorted(env._shown), env._draft, vars(env._draft_cost),
                            env.action_masks().tolist()])  # fmt: skip
                done, t = term or trunc, t + 1
                assert t <= env.max_decisions, "an episode ran past its decision budget"
    return out


def _first_valid(r: int, t: int, mask: np.ndarray) -> int:
    valid = np.flatnonzero(mask)
    return int(valid[min(1 + (r + t) % 2, len(valid) - 1)])


def _with_masked(r: int, t: int, mask: np.ndarray) -> int:
    """A masked action now and then (run as skip, flagged in the info)."""
    masked = np.flatnonzero(~mask)
    if (r + t) % 2 == 0 and len(masked):
        return int(masked[0])
    return _first_valid(r, t, mask)


@pytest.fixture(scope="module")
def task_ids() -> list[str]:
    env = MemorySelectionEnv(benchmark="SQL")
    return [t.task_id for t in env.tasks[:6]]


@pytest.mark.parametrize(
    ("kwargs", "policy"),
    [
        ({}, _first_valid),
        ({"obs_layout": "extended", "max_decisions": 3}, _with_masked),
        ({"agent": "reflexion", "max_decisions": 3}, _first_valid),
        ({"action_space": "pairs"}, _first_valid),
    ],
    ids=["paper", "extended-masked", "reflexion", "pair"],
)
def test_replayed_decisions_equal_the_decided_ones(
    task_ids: list[str], kwargs: dict[str, Any], policy: Callable[[int, int, np.ndarray], int]
) -> None:
    memo = MemorySelectionEnv(benchmark="SQL", **kwargs)
    plain = MemorySelectionEnv(benchmark="SQL", llm=OpaqueLLM(SimulatedLLM(seed=0)), **kwargs)
    counts = _counting(memo)
    assert _trace(memo, task_ids, policy) == _trace(plain, task_ids, policy)
    assert memo.__dict__.get("_transitions"), "nothing was memoised"
    assert not plain.__dict__.get("_transitions")  # an LLM that does not say it is pure
    first = dict(counts)
    _trace(memo, task_ids, policy, rounds=3)  # the same decisions again: all replayed
    assert counts == first


def test_a_replay_hands_out_copies(task_ids: list[str]) -> None:
    env = MemorySelectionEnv(benchmark="SQL")
    runs = []
    for _ in range(3):  # decided, replayed, replayed after the caller changed the replay
        _, info = env.reset(options={"task_id": task_ids[0]})
        obs, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[-1]))
        runs.append((obs.copy(), _plain(info)))
        obs[:] = 7.0  # a caller that changes what it was handed
        info["action_mask"][:] = False
        info["retrieved_ids"].append("forged")
        info["decision_cost"]["tokens"] = -1
        env.action_masks()[:] = False
    assert all(np.array_equal(runs[0][0], obs) and runs[0][1] == info for obs, info in runs[1:])


def test_a_verdict_other_than_ok_is_decided_afresh(task_ids: list[str]) -> None:
    """A hang guard's verdict ("infrastructure") may go otherwise next time: never replayed."""
    env = MemorySelectionEnv(benchmark="SQL")
    counts = _counting(env)
    check = env._agent.evaluator.check

    def guarded(state: Any, action: Any) -> Outcome:
        check(state, action)
        return Outcome(0.0, False, "hang guard", status="infrastructure")

    env._agent.evaluator.check = guarded
    for _ in range(2):
        env.reset(options={"task_id": task_ids[1]})
        env.step(0)
    assert not env.__dict__.get("_transitions")
    env._agent.evaluator.check = check
    calls = counts["check"]
    for _ in range(2):
        env.reset(options={"task_id": task_ids[1]})
        env.step(0)
    assert counts["check"] == calls + 1  # now "ok": decided once, then replayed


def test_a_changed_configuration_is_never_served_a_stale_decision(task_ids: list[str]) -> None:
    env = MemorySelectionEnv(benchmark="SQL")
    env.reset(options={"task_id": task_ids[2]})
    _, before, *_ = env.step(0)
    env.reward_weights = {**env.reward_weights, "calls": env.reward_weights["calls"] + 0.5}
    env.reset(options={"task_id": task_ids[2]})
    _, after, *_ = env.step(0)
    assert after == pytest.approx(before - 0.5)


def test_the_path_survives_pickling_and_the_memo_does_not(task_ids: list[str]) -> None:
    env = MemorySelectionEnv(benchmark="SQL", max_decisions=3)
    _, info = env.reset(options={"task_id": task_ids[3]})
    env.step(0)
    assert env.__dict__.get("_transitions") and len(env._path) == 1
    clone = pickle.loads(pickle.dumps(env))
    assert not clone.__dict__.get("_transitions") and clone._path == env._path
    if not clone._done:
        a = _first_valid(0, 1, clone.action_masks())
        theirs, ours = clone.step(a), env.step(a)
        assert _plain(theirs[4]) == _plain(ours[4]) and theirs[1] == ours[1]


def test_the_memo_is_bounded(task_ids: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transitions, "TRANSITION_MEMO_SIZE", 2)
    env = MemorySelectionEnv(benchmark="SQL")
    for task_id in task_ids:
        env.reset(options={"task_id": task_id})
        env.step(0)
        assert len(env.__dict__["_transitions"]) <= 2


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", ["SAT", "SMT"])
def test_replays_are_exact_on_the_solver_domains(benchmark: str) -> None:
    """The same on SAT and SMT, whose checks run in a killable worker and whose verdicts carry
    solver budgets: replayed decisions equal decided ones, and the memo was used."""
    memo = MemorySelectionEnv(benchmark=benchmark, max_decisions=3)
    plain = MemorySelectionEnv(benchmark=benchmark, max_decisions=3, llm=OpaqueLLM(SimulatedLLM(seed=0)))
    ids = [t.task_id for t in memo.tasks[:4]]
    try:
        counts = _counting(memo)
        assert _trace(memo, ids, _first_valid, rounds=2) == _trace(plain, ids, _first_valid, rounds=2)
        first = dict(counts)
        _trace(memo, ids, _first_valid, rounds=2)
        assert memo.__dict__.get("_transitions") and counts["llm"] < 2 * first["llm"]
    finally:
        memo.close()
        plain.close()
