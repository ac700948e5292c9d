"""The code domain through the generic contract: registration, the base agent loop with a tiny
fake LLM, the simulated LLM, and the selector env."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import cm_gym
from cm_gym.agent import BaseAgent, RecordView
from cm_gym.core.types import AgentState, Task
from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.code.evaluator import CodeEvaluator
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import DRAFT_ACTION, REFLECT, REVISE_WITH_RECORD, Completion


class FakeLLM:
    """Drafts the buggy program first and the reference once it has seen feedback; revises by the
    record's contrast through the domain (as a frozen LLM that follows the record would)."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        self.calls.append(template)
        task: Task = fields["task"]
        if template == DRAFT_ACTION:
            state: AgentState = fields["state"]
            text = task.meta["buggy"] if state.decision == 0 else task.reference
        elif template == REVISE_WITH_RECORD:
            revised = CodeDomain().apply_contrast(
                task, fields["draft"], fields["record_a_minus"], fields["record_a_plus"]
            )
            text = revised or fields["draft"]
        elif template == REFLECT:
            return Completion("I should fix the comparison.", 10, 8)
        else:  # pragma: no cover - the agent asks nothing else
            raise AssertionError(template)
        return Completion(f"Here you go:\n```python\n{text}```\n", 100, len(text) // 4)


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return cm_gym.domains.registry.get_benchmark("Code").load_tasks()


def test_benchmarks_are_registered_plugins() -> None:
    code, qb = get_benchmark("Code"), get_benchmark("QuixBugs")
    assert code.env_id == "cm_gym/Code-v0" and qb.env_id == "cm_gym/QuixBugs-v0"
    assert "cm_gym/Code-v0" in gym.registry and "cm_gym/QuixBugs-v0" in gym.registry
    assert isinstance(get_domain("code"), CodeDomain)
    assert isinstance(get_domain("code").make_evaluator(), CodeEvaluator)


@pytest.mark.parametrize("kind", ["react", "reflexion"])
def test_base_agent_drafts_fails_then_repairs(tasks: list[Task], kind: str) -> None:
    domain = CodeDomain()
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator(), kind=kind)
    for task in tasks[:2]:
        state = AgentState(task)
        first = agent.decide(state)
        assert not first.outcome.solved and first.outcome.feedback.startswith("FAILED ")
        assert first.cost.evaluator_calls == 1 and first.cost.failures == 1
        assert (len(first.state.reflections) == 1) == (kind == "reflexion")
        second = agent.decide(first.state)
        assert second.outcome.solved and second.outcome.score == 1.0
        assert second.state.decision == 2


def test_base_agent_revises_with_a_record(tasks: list[Task]) -> None:
    by = {f"{t.meta['template']}:{t.features['bug_class']}": t for t in tasks}
    src, target = by["count_below:flipped_comparison"], by["count_longer_than:flipped_comparison"]
    record = RecordView("r1", "a record", src.meta["buggy"], src.reference)
    domain = CodeDomain()
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator())
    decision = agent.decide(AgentState(target), record=record)
    assert decision.changed_by_memory and decision.record_id == "r1"
    assert decision.outcome.solved


def test_simulated_llm_drives_the_code_domain(tasks: list[Task]) -> None:
    simulated = pytest.importorskip("cm_gym.llm.simulated")
    domain = CodeDomain()
    agent = BaseAgent(simulated.SimulatedLLM(seed=0), domain, domain.make_evaluator())
    scores = []
    for task in tasks[:6]:
        decision = agent.decide(AgentState(task))
        assert 0.0 <= decision.outcome.score <= 1.0 and decision.outcome.status in ("ok", "error")
        scores.append(decision.outcome.score)
    assert len(set(scores)) > 1  # some drafts right, some plausibly wrong


def test_selector_env_steps_on_code_tasks(tmp_path: Path, tasks: list[Task]) -> None:
    from cm_gym.memory.store import RecordStore

    live = RecordStore(tmp_path / "live.sqlite", domain="code", benchmark="Code")
    live.freeze(tmp_path / "frozen.sqlite")
    live.close()
    env = gym.make("cm_gym/Code-v0", store=tmp_path / "frozen.sqlite", tasks=tasks[:3], max_decisions=2)
    obs, info = env.reset(seed=0)
    assert obs.shape == (98,) and np.isfinite(obs).all()
    _, reward, terminated, truncated, info = env.step(0)
    assert "score" in info and 0.0 <= info["score"] <= 1.0 and np.isfinite(reward)
    env.close()
