"""The decision path's memos replay exactly what they skip (issue 35 item 1, second round).

The selection env memoises each task's first decision at `reset` (draft, retrieved records,
observation, mask, the agent's draft mark) when its LLM's replies are pure
(`SimulatedLLM.pure_replies`), and each record's view; the simulator memoises its
REVISE_WITH_RECORD replies on the rendered prompt. Each test runs the same decisions with the
memo and without it (an LLM wrapper that does not say its replies are pure, or a fresh simulator)
and asks for identical observations, masks, rewards and infos, so a memo that kept a stale or
shared value fails here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import cm_gym  # noqa: F401  (registers the benchmarks)
from cm_gym.envs.selection import MemorySelectionEnv
from cm_gym.llm.base import REVISE_WITH_RECORD
from cm_gym.llm.simulated import SimulatedLLM
from tests.envs.opaque_llm import OpaqueLLM


def _trace(env: MemorySelectionEnv, task_ids: list[str], rounds: int = 3) -> list[Any]:
    """Every task in turn, `rounds` times: reset to it, then one fixed policy to the episode's
    end (the first valid record, else skip), recording everything the env returns."""
    out: list[Any] = []
    for r in range(rounds):
        for task_id in task_ids:
            obs, info = env.reset(seed=r, options={"task_id": task_id})
            out.append(_record(obs, info))
            out.append(env._agent.draft_mark(info["next_draft"]))
            done = False
            while not done:
                valid = np.flatnonzero(info["action_mask"])
                action = int(valid[min(1 + r, len(valid) - 1)])
                obs, reward, term, trunc, info = env.step(action)
                out.append([action, float(reward), term, trunc, _record(obs, info)])
                done = term or trunc
    return out


def _record(obs: np.ndarray, info: Mapping[str, Any]) -> list[Any]:
    plain = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()}
    return [obs.tolist(), json.dumps(plain, sort_keys=True, default=str)]


@pytest.fixture(scope="module")
def task_ids() -> list[str]:
    env = MemorySelectionEnv(benchmark="SQL")
    return [t.task_id for t in env.tasks[:8]]


@pytest.mark.parametrize("layout", ["paper", "extended"])
def test_first_decision_memo_replays_the_uncached_decision(task_ids: list[str], layout: str) -> None:
    memo = MemorySelectionEnv(benchmark="SQL", obs_layout=layout)
    plain = MemorySelectionEnv(benchmark="SQL", obs_layout=layout, llm=OpaqueLLM(SimulatedLLM(seed=0)))
    assert _trace(memo, task_ids) == _trace(plain, task_ids)
    assert len(memo.__dict__.get("_first_decisions", {})) == len(task_ids)  # one per task, reused
    assert not plain.__dict__.get("_first_decisions")  # an LLM that does not say it is pure


def test_first_decision_memo_hands_out_copies(task_ids: list[str]) -> None:
    env = MemorySelectionEnv(benchmark="SQL")
    obs, info = env.reset(options={"task_id": task_ids[0]})
    obs[:] = 7.0
    info["action_mask"][:] = False
    env.action_masks()[:] = False
    again, info2 = env.reset(options={"task_id": task_ids[0]})
    assert not np.any(again == 7.0) and info2["action_mask"][0]


def test_revision_memo_gives_the_fresh_simulators_reply(task_ids: list[str]) -> None:
    env = MemorySelectionEnv(benchmark="SQL")
    sim = env.llm
    assert isinstance(sim, SimulatedLLM)
    asked = []
    for task_id in task_ids:
        _, info = env.reset(options={"task_id": task_id})
        for slot in env._retrieved:
            view = env._record_view(slot.record)
            fields = env._agent._fields(
                env._state,
                draft=info["next_draft"],
                record=view.rendered,
                record_id=view.record_id,
                record_a_minus=view.a_minus,
                record_a_plus=view.a_plus,
            )
            asked.append((fields, sim.complete(REVISE_WITH_RECORD, fields)))
    assert asked, "no record was retrieved for these tasks"
    for fields, first in asked:  # a hit, then a simulator that never saw the prompt
        assert sim.complete(REVISE_WITH_RECORD, fields) == first
        assert SimulatedLLM(seed=0).complete(REVISE_WITH_RECORD, fields) == first


def test_blind_task_is_kept_per_task_and_follows_a_replaced_task(task_ids: list[str]) -> None:
    """`reset` blanks the task's reference once per task object (what retrieval and the query
    text see), and a task replaced under the same id gets a blind copy of the new one."""
    env = MemorySelectionEnv(benchmark="SQL")
    env.reset(seed=0, options={"task_id": task_ids[0]})
    first = env._blind_task
    assert first.reference == "" and first.task_id == task_ids[0]
    assert dataclasses.replace(first, reference=env._task.reference) == env._task
    env.reset(seed=1, options={"task_id": task_ids[1]})
    env.reset(seed=2, options={"task_id": task_ids[0]})
    assert env._blind_task is first
    i = env._task_index[task_ids[0]]
    env.tasks = (
        *env.tasks[:i],
        dataclasses.replace(env.tasks[i], prompt="Another question?"),
        *env.tasks[i + 1 :],
    )
    env.reset(seed=3, options={"task_id": task_ids[0]})
    assert env._blind_task.prompt == "Another question?" and env._blind_task.reference == ""
