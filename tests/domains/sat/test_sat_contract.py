"""The SAT plugin through the generic contract only: registry, BaseAgent with a tiny fake LLM,
and the simulated LLM's draft failure rates on SAT tasks."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cm_gym.agent import BaseAgent, RecordView
from cm_gym.core.types import AgentState, Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import DRAFT_ACTION, REFLECT, REVISE_WITH_RECORD, Completion


class FakeLLM:
    """Drafts a fixed, wrong encoding first, then the task's reference (a unit-test fake)."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        self.calls[template] += 1
        task: Task = fields["task"]
        if template == DRAFT_ACTION:
            text = (
                task.reference if fields["decision"] else task.reference.replace("exactly_one", "at_most_one")
            )
            return Completion(f"Here is my answer:\n```\n{text}\n```", 50, 20)
        if template == REVISE_WITH_RECORD:
            return Completion(f"```\n{fields['record_a_plus']}\n```", 60, 20)
        if template == REFLECT:
            return Completion("Keep exactly one per item.", 40, 8)
        raise AssertionError(template)


def test_benchmarks_are_registered_with_the_sat_domain() -> None:
    assert get_benchmark("SAT").env_id == "cm_gym/SAT-v0"
    assert get_benchmark("cm_gym/SATLIB-v0").name == "SATLIB"
    assert get_domain("sat").name == "sat"
    assert get_benchmark("SAT").domain().name == "sat"


@pytest.mark.parametrize("kind", ["react", "reflexion"])
def test_base_agent_runs_sat_tasks_through_the_contract(kind: str) -> None:
    spec = get_benchmark("SAT")
    domain = spec.domain()
    tasks = spec.load_tasks()[::60][:5]
    llm = FakeLLM()
    agent = BaseAgent(llm, domain, domain.make_evaluator(), kind=kind)
    for task in tasks:
        state = AgentState(task)
        first = agent.decide(state)
        assert first.action == task.reference.replace("exactly_one", "at_most_one")
        assert not first.outcome.solved and first.cost.failures == 1
        second = agent.decide(first.state)
        assert second.outcome.solved and second.state.solved
        assert len(second.state.reflections) == (1 if kind == "reflexion" else 0)
    assert llm.calls[DRAFT_ACTION] == 2 * len(tasks)


def test_revision_with_a_record_uses_the_domain_parser() -> None:
    domain = get_domain("sat")
    task = get_benchmark("SAT").load_tasks()[0]
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator())
    record = RecordView("r1", "use exactly_one", "at_most_one ...", task.reference)
    decision = agent.decide(AgentState(task), record)
    assert decision.changed_by_memory and decision.outcome.solved


@pytest.mark.data
def test_base_agent_runs_satlib_tasks(shared_data: Path) -> None:
    spec = get_benchmark("SATLIB")
    domain = spec.domain()
    tasks = spec.load_tasks(families=["uuf50-218"], limit=3)
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator())
    for task in tasks:
        decision = agent.decide(AgentState(task))
        assert decision.outcome.solved and decision.outcome.details["verdict"] == "unsat"


def _failure_rate(tasks: list[Task]) -> float:
    """First-decision failure rate of BaseAgent driven by the simulated LLM (full template path)."""
    from cm_gym.llm.simulated import SimulatedLLM

    domain = get_domain("sat")
    agent = BaseAgent(SimulatedLLM(seed=0), domain, domain.make_evaluator())
    return sum(not agent.decide(AgentState(t)).outcome.solved for t in tasks) / len(tasks)


def test_simulated_llm_draft_failure_rate_is_sensible() -> None:
    pytest.importorskip("cm_gym.llm.simulated")
    rate = _failure_rate(list(get_benchmark("SAT").load_tasks()))
    assert 0.2 <= rate <= 0.6, rate


@pytest.mark.data
def test_simulated_llm_draft_failure_rate_on_satlib(shared_data: Path) -> None:
    pytest.importorskip("cm_gym.llm.simulated")
    rate = _failure_rate(list(get_benchmark("SATLIB").load_tasks(limit=60)))
    assert 0.15 <= rate <= 0.6, rate
