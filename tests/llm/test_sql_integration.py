"""The simulated LLM on the real SQL domain (skipped until the SQL benchmark is registered)."""

from __future__ import annotations

import dataclasses

import pytest

from cm_gym.core.types import Action, AgentState, Attempt, Outcome, Task
from cm_gym.domains.registry import RegistryError, get_benchmark, get_domain
from cm_gym.llm.base import DISTIL_RECORD, DRAFT_ACTION, GENERATE_LOCAL_ALTERNATIVES, REVISE_WITH_RECORD
from cm_gym.llm.prompts import parse_alternatives, parse_distil, parse_rendered, render
from cm_gym.llm.simulated import SimulatedLLM

try:
    SQL = get_benchmark("SQL")
except RegistryError:
    pytest.skip("the SQL benchmark is not registered", allow_module_level=True)


@pytest.fixture(scope="module")
def sql_tasks() -> list[Task]:
    return list(SQL.load_tasks())[:60]


def test_sql_drafts_fail_sometimes_and_are_deterministic(sql_tasks: list[Task]) -> None:
    domain = get_domain(sql_tasks[0].domain)
    evaluator = domain.make_evaluator()
    llm, again = SimulatedLLM(seed=0), SimulatedLLM(seed=0)
    solved = 0
    for task in sql_tasks:
        text = llm.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)}).text
        assert text == again.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)}).text
        outcome = evaluator.check(AgentState(task), Action(domain.parse_action(text)))
        solved += outcome.solved
    assert 0 < solved < len(sql_tasks)  # the error model makes some, not all, drafts fail


def test_sql_server_side_identity_and_other_templates(sql_tasks: list[Task]) -> None:
    lookup = {t.task_id: t for t in sql_tasks}
    local, remote = SimulatedLLM(seed=2), SimulatedLLM(seed=2, task_lookup=lookup)
    domain = get_domain(sql_tasks[0].domain)
    failed = Outcome(score=0.0, solved=False, feedback="Wrong result set.")
    for task in sql_tasks[:15]:
        state = AgentState(task).with_attempt(Attempt("SELECT 1", failed))
        draft = local.draft_action(task)
        blind = dataclasses.replace(task, reference="")
        edits = [e.text for e in domain.edit_operators(blind, draft)]
        a_plus = edits[0] if edits else draft
        cases = {
            DRAFT_ACTION: {"task": task, "state": state, "agent": "reflexion"},
            REVISE_WITH_RECORD: {
                "task": task,
                "state": state,
                "draft": draft,
                "record": "r",
                "record_id": "x",
                "record_a_minus": draft,
                "record_a_plus": a_plus,
            },
            GENERATE_LOCAL_ALTERNATIVES: {"task": task, "state": state, "action": draft, "k": 4},
            DISTIL_RECORD: {"task": task, "a_minus": draft, "a_plus": a_plus},
        }
        for template, fields in cases.items():
            name, strings = parse_rendered(render(template, fields).messages)
            expected = local.complete(template, fields)
            assert remote.complete(name, strings) == expected
            if template == GENERATE_LOCAL_ALTERNATIVES:
                assert set(parse_alternatives(expected.text, draft)) <= set(edits)
            if template == DISTIL_RECORD:
                situation, _ = parse_distil(expected.text)
                assert situation
