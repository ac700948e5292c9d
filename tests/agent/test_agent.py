from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from cm_gym.agent import BaseAgent, Cost, Decision, RecordView, reuse_label
from cm_gym.core.types import AgentState, Outcome
from cm_gym.llm.base import DRAFT_ACTION, REFLECT, REVISE_WITH_RECORD, Completion
from tests.toy_domain import ToyDomain, toy_tasks


class ScriptedLLM:
    """Replies from a script per template; records every call (a unit-test fake)."""

    name = "scripted"

    def __init__(self, replies: Mapping[str, str]) -> None:
        self.replies = dict(replies)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        self.calls.append((template, dict(fields)))
        return Completion(self.replies[template], prompt_tokens=10, completion_tokens=5)


def _agent(kind: str, replies: Mapping[str, str]) -> tuple[BaseAgent, ScriptedLLM]:
    llm = ScriptedLLM(replies)
    domain = ToyDomain()
    return BaseAgent(llm, domain, domain.make_evaluator(), kind=kind), llm


def test_decide_without_record_executes_the_draft_and_counts_costs() -> None:
    task = toy_tasks(2)[0]  # reference "x >= k"
    agent, llm = _agent("react", {DRAFT_ACTION: "```\nx > 1\n```"})
    decision = agent.decide(AgentState(task=task))
    assert decision.draft == decision.action == "x > 1"
    assert decision.record_id is None and not decision.changed_by_memory
    assert (decision.cost.evaluator_calls, decision.cost.failures, decision.cost.tokens) == (1, 1, 15)
    assert [t for t, _ in llm.calls] == [DRAFT_ACTION]
    assert decision.state.decision == 1 and decision.state.reflections == ()


def test_revise_uses_exactly_one_record_and_reflexion_reflects() -> None:
    task = toy_tasks(2)[0]
    agent, llm = _agent(
        "reflexion",
        {DRAFT_ACTION: "x > 1", REVISE_WITH_RECORD: "ACTION: x >= 1", REFLECT: "Use the boundary."},
    )
    record = RecordView(record_id="r1", rendered="use >=", a_minus="age > 18", a_plus="age >= 18")
    decision = agent.decide(AgentState(task=task), record)
    assert decision.action == "x >= 1" and decision.changed_by_memory and decision.record_id == "r1"
    templates = [t for t, _ in llm.calls]
    assert templates.count(REVISE_WITH_RECORD) == 1
    revise_fields = llm.calls[1][1]
    assert revise_fields["record_a_plus"] == "age >= 18" and revise_fields["draft"] == "x > 1"
    assert not decision.outcome.solved  # reference is "x >= 7"
    assert decision.state.reflections == ("Use the boundary.",) and templates[-1] == REFLECT


def test_unknown_agent_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="agent kind"):
        _agent("planner", {})


def _decision(draft: str, action: str, record: str | None, score: float, solved: bool) -> Decision:
    state = AgentState(task=toy_tasks(1)[0])
    return Decision(state, draft, action, Outcome(score=score, solved=solved), record, Cost())


def test_paper_reuse_label_follows_appendix_b3() -> None:
    def label(d: Decision, previous: float | None) -> int:
        return reuse_label(d, previous, rule="paper")

    assert label(_decision("a", "a", "r", 1.0, True), 0.0) == 0  # unchanged → neutral
    assert label(_decision("a", "b", "r", 1.0, True), None) == 1  # changed and solved
    assert label(_decision("a", "b", "r", 0.2, False), 0.5) == -1  # worse than previous
    assert label(_decision("a", "b", "r", 0.7, False), 0.5) == 1  # better than previous
    assert label(_decision("a", "b", "r", 0.0, False), None) == 0  # no reference attempt
    assert label(_decision("a", "b", None, 1.0, True), None) == 0  # no record used


def test_draft_reuse_label_compares_with_the_memory_free_draft() -> None:
    def label(d: Decision, draft_score: float, draft_solved: bool = False) -> int:
        return reuse_label(d, None, Outcome(score=draft_score, solved=draft_solved))

    assert label(_decision("a", "a", "r", 0.0, False), 1.0, True) == 0  # unchanged → neutral
    assert label(_decision("a", "b", "r", 0.0, False), 1.0, True) == -1  # broke a right draft
    assert label(_decision("a", "b", "r", 1.0, True), 0.0) == 1  # fixed a wrong draft
    assert label(_decision("a", "b", "r", 0.0, False), 0.0) == 0  # changed, still wrong
    assert label(_decision("a", "b", "r", 0.6, False), 0.4) == 1  # graded: better
    assert label(_decision("a", "b", "r", 0.4, False), 0.6) == -1  # graded: worse
    with pytest.raises(ValueError, match="draft's outcome"):
        reuse_label(_decision("a", "b", "r", 1.0, True), None)
    with pytest.raises(ValueError, match="rule"):
        reuse_label(_decision("a", "b", "r", 1.0, True), None, rule="mine")


def _sql_agent(replies: Mapping[str, str]) -> tuple[BaseAgent, Any]:
    from cm_gym.domains.registry import get_benchmark
    from cm_gym.domains.sql.domain import SQLDomain

    domain = SQLDomain()
    return BaseAgent(ScriptedLLM(replies), domain, domain.make_evaluator()), get_benchmark(
        "SQL"
    ).load_tasks()[0]


def test_two_unusable_replies_are_no_change_and_the_feedback_says_why() -> None:
    """A weak model: its draft and its revision hold no query. Textually they differ, but neither
    is an action: no change (reuse label 0), and the feedback leads with the parse failure."""
    agent, task = _sql_agent(
        {DRAFT_ACTION: "I cannot see the schema.", REVISE_WITH_RECORD: "Sorry, no idea."}
    )
    record = RecordView("r1", "use >=", "SELECT a FROM t WHERE x > 1", "SELECT a FROM t WHERE x >= 1")
    decision = agent.decide(AgentState(task), record)
    assert decision.draft != decision.action and not decision.changed_by_memory
    assert reuse_label(decision, None, decision.outcome, rule="draft") == 0
    assert decision.outcome.feedback.startswith("No usable SQL query: the reply holds no SQL query")


def test_a_reformatted_query_is_no_change_and_a_real_edit_is() -> None:
    query = "SELECT name FROM singer WHERE age > 30"
    same = "```sql\nselect name\nfrom singer\nwhere age > 30;\n```"
    agent, task = _sql_agent({DRAFT_ACTION: f"```sql\n{query}\n```", REVISE_WITH_RECORD: same})
    record = RecordView("r1", "use >=", "age > 30", "age >= 30")
    decision = agent.decide(AgentState(task), record)
    assert decision.action != decision.draft and not decision.changed_by_memory
    assert "No usable" not in decision.outcome.feedback
    agent, task = _sql_agent({DRAFT_ACTION: query, REVISE_WITH_RECORD: query.replace(">", ">=")})
    assert agent.decide(AgentState(task), record).changed_by_memory


def test_cost_add_and_copy_cover_every_field() -> None:
    """`Cost.add` and `Cost.copy` name the fields one by one (no introspection on every
    decision): each field, a new one included, must be added and copied."""
    names = [f.name for f in dataclasses.fields(Cost)]
    a = Cost(**{n: i + 1 for i, n in enumerate(names)})
    b = Cost(**{n: 10 * (i + 1) for i, n in enumerate(names)})
    copied = a.copy()
    assert copied == a and copied is not a
    a.add(b)
    assert [getattr(a, n) for n in names] == [11 * (i + 1) for i in range(len(names))]
    assert [getattr(copied, n) for n in names] == [i + 1 for i in range(len(names))]  # independent
