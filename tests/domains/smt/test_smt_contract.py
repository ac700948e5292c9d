"""The SMT plugin through the generic contract only: registry, BaseAgent with a tiny fake LLM,
and the simulated LLM's draft failure rates on SMT tasks."""

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


def slip(task: Task) -> str:
    """A draft that fails: an (exit) for scripts (refused), a tiny rlimit for configurations."""
    if task.features["kind"] == "solver":
        return task.reference.replace(f"rlimit: {task.features['max_rlimit']}", "rlimit: 1")
    return task.reference + "\n(exit)"


class FakeLLM:
    """Drafts a failing action first, then the reference (a unit-test fake)."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        self.calls[template] += 1
        task: Task = fields["task"]
        if template == DRAFT_ACTION:
            text = task.reference if fields["decision"] else slip(task)
            return Completion(f"```smt2\n{text}\n```", 50, 30)
        if template == REVISE_WITH_RECORD:
            return Completion(f"ACTION: {fields['record_a_plus']}", 60, 20)
        if template == REFLECT:
            return Completion("Do not end the script myself.", 40, 8)
        raise AssertionError(template)


def test_benchmarks_are_registered_with_the_smt_domain() -> None:
    assert get_benchmark("SMT").env_id == "cm_gym/SMT-v0"
    assert get_benchmark("cm_gym/SMTLIB-v0").name == "SMTLIB"
    assert get_domain("smt").name == "smt" and get_benchmark("SMTLIB").domain().name == "smt"


@pytest.mark.parametrize("kind", ["react", "reflexion"])
def test_base_agent_runs_smt_tasks_through_the_contract(kind: str) -> None:
    spec = get_benchmark("SMT")
    domain = spec.domain()
    tasks = spec.load_tasks()[::70][:5]
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator(), kind=kind)
    for task in tasks:
        first = agent.decide(AgentState(task))
        assert (
            not first.outcome.solved
            and first.outcome.status == "refused"
            and "(exit)" in first.outcome.reason
        )
        second = agent.decide(first.state)
        assert second.outcome.solved and second.cost.evaluator_calls == 1
        assert len(second.state.reflections) == (1 if kind == "reflexion" else 0)


def test_revision_with_a_record() -> None:
    domain = get_domain("smt")
    task = get_benchmark("SMT").load_tasks()[0]
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator())
    decision = agent.decide(AgentState(task), RecordView("r1", "no exit", slip(task), task.reference))
    assert decision.changed_by_memory and decision.outcome.solved


@pytest.mark.data
def test_base_agent_runs_smtlib_tasks(shared_data: Path) -> None:
    spec = get_benchmark("SMTLIB")
    domain = spec.domain()
    agent = BaseAgent(FakeLLM(), domain, domain.make_evaluator())
    for task in spec.load_tasks(logics=["QF_BV"], limit=2):
        first = agent.decide(AgentState(task))
        assert first.outcome.status == "budget"
        assert agent.decide(first.state).outcome.solved


def _failure_rate(tasks: list[Task]) -> float:
    from cm_gym.llm.simulated import SimulatedLLM

    domain = get_domain("smt")
    agent = BaseAgent(SimulatedLLM(seed=0), domain, domain.make_evaluator())
    return sum(not agent.decide(AgentState(t)).outcome.solved for t in tasks) / len(tasks)


def test_simulated_llm_draft_failure_rate_is_sensible() -> None:
    pytest.importorskip("cm_gym.llm.simulated")
    rate = _failure_rate(list(get_benchmark("SMT").load_tasks())[::3])
    assert 0.2 <= rate <= 0.6, rate


@pytest.mark.data
def test_simulated_llm_draft_failure_rate_on_smtlib(shared_data: Path) -> None:
    pytest.importorskip("cm_gym.llm.simulated")
    rate = _failure_rate(list(get_benchmark("SMTLIB").load_tasks(logics=["QF_LRA", "QF_BV"], limit=20)))
    assert 0.15 <= rate <= 0.65, rate
