"""The simulated LLM: determinism, persistent slips, fixes, revision without the reference,
alternatives, distillation, judge, reflection, token counting, server-side identity."""

from __future__ import annotations

import dataclasses

import pytest

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.core.types import AgentState, Attempt, Outcome, Task
from cm_gym.domains.registry import get_domain
from cm_gym.llm.base import (
    BEST_OF_N_JUDGE,
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    REVISE_WITH_RECORD,
    estimate_tokens,
)
from cm_gym.llm.errors import LLMError
from cm_gym.llm.prompts import parse_alternatives, parse_distil, parse_judge, parse_rendered, render
from cm_gym.llm.simulated import SimulatedLLM

FAILED = Outcome(score=0.0, solved=False, feedback="Wrong result set. Rows differ.")


def _state(task: Task, failures: int) -> AgentState:
    state = AgentState(task)
    for i in range(failures):
        state = state.with_attempt(Attempt(f"SELECT {i}", FAILED))
    return state


def _draft(llm: SimulatedLLM, task: Task, failures: int = 0, agent: str = "react") -> str:
    domain = get_domain(task.domain)
    agent_obj = BaseAgent(llm, domain, domain.make_evaluator(), kind=agent)
    return agent_obj.draft(_state(task, failures), Cost())


def test_same_seed_same_text_different_seed_differs(toy: list[Task]) -> None:
    a, b, c = SimulatedLLM(seed=0), SimulatedLLM(seed=0), SimulatedLLM(seed=1)
    drafts_a = [_draft(a, t) for t in toy]
    assert drafts_a == [_draft(b, t) for t in toy]
    assert drafts_a == [_draft(a, t) for t in toy]  # repeated calls too
    assert drafts_a != [_draft(c, t) for t in toy]


def test_slips_follow_features_and_are_applied(toy: list[Task]) -> None:
    llm = SimulatedLLM(seed=0)
    strict_slips = {t.task_id: [op.name for op in llm.active_slips(t)] for t in toy}
    inclusive = [t for t in toy if t.features["boundary"] == "inclusive"]
    exclusive = [t for t in toy if t.features["boundary"] == "strict"]
    assert not any("strict_boundary" in strict_slips[t.task_id] for t in exclusive)  # probability 0
    n_boundary = sum("strict_boundary" in strict_slips[t.task_id] for t in inclusive)
    assert 0 < n_boundary < len(inclusive)  # probability 0.8 over 20 tasks
    for t in inclusive:
        draft = _draft(llm, t)
        assert ("age > " in draft) == ("strict_boundary" in strict_slips[t.task_id])
    # the slip that never fits is active everywhere and changes nothing
    assert all("never_fits" in s for s in strict_slips.values())
    correct = sum(_draft(llm, t) == t.reference for t in toy)
    assert 0 < correct < len(toy)


def test_failed_attempts_fix_slips_monotonically_reflexion_faster(toy: list[Task]) -> None:
    llm = SimulatedLLM(seed=3)
    react_total = reflexion_total = 0
    for task in toy:
        previous = {op.name for op in llm.remaining_slips(task, 0, "react")}
        for failures in range(1, 6):
            react = {op.name for op in llm.remaining_slips(task, failures, "react")}
            reflexion = {op.name for op in llm.remaining_slips(task, failures, "reflexion")}
            assert react <= previous  # a fixed slip stays fixed
            assert reflexion <= react  # same draws, higher fix probability
            previous = react
        react_total += len(react)
        reflexion_total += len(reflexion)
        assert _draft(llm, task, 5, "react") == llm.draft_action(task, 5, "react")
    assert reflexion_total < react_total


def test_revise_never_reads_the_reference(toy: list[Task]) -> None:
    """The toy domain's apply_contrast returns task.reference when it is handed one: a simulator
    that passed the real task would answer the reference instead of the contrast."""
    llm = SimulatedLLM(seed=0)
    task = next(t for t in toy if t.features["boundary"] == "strict")
    draft = "SELECT name FROM users WHERE age >= 30 ORDER BY name"
    record = RecordView("rec-1", "Situation: limit", a_minus="LIMIT 5", a_plus="LIMIT 6")
    outcomes = set()
    for decision in range(12):  # several prompts: the ignore-record draw varies with the prompt
        state = _state(task, decision)
        agent = BaseAgent(llm, get_domain(task.domain), get_domain(task.domain).make_evaluator())
        outcomes.add(agent.revise(state, draft, record, Cost()))
    assert task.reference not in outcomes
    assert outcomes <= {draft}  # the contrast '5 -> 6' does not occur in this draft
    record2 = RecordView("rec-2", "Situation: boundary", a_minus="age >= 30", a_plus="age > 30")
    revised = set()
    for decision in range(12):
        agent = BaseAgent(llm, get_domain(task.domain), get_domain(task.domain).make_evaluator())
        revised.add(agent.revise(_state(task, decision), draft, record2, Cost()))
    assert revised == {draft, draft.replace("age >= 30", "age > 30")}  # applied, sometimes ignored
    assert task.reference not in revised


def test_alternatives_distil_judge_reflect(toy: list[Task]) -> None:
    llm = SimulatedLLM(seed=0)
    task = toy[0]
    domain = get_domain(task.domain)
    action = "SELECT name FROM users WHERE age > 18"
    fields = {"task": task, "state": _state(task, 1), "action": action, "k": 4}
    edits = parse_alternatives(llm.complete(GENERATE_LOCAL_ALTERNATIVES, fields).text, action)
    allowed = {e.text for e in domain.edit_operators(dataclasses.replace(task, reference=""), action)}
    assert 1 <= len(edits) <= 2 and set(edits) <= allowed
    one = parse_alternatives(llm.complete(GENERATE_LOCAL_ALTERNATIVES, fields | {"k": 1}).text, action)
    assert len(one) == 1 and one[0] in allowed

    distil = {"task": task, "a_minus": "age > 18", "a_plus": "age >= 18", "evidence": {"score_plus": 1}}
    assert parse_distil(llm.complete(DISTIL_RECORD, distil).text) == (
        "A threshold comparison may omit its boundary value.",
        'mentions_any("at least")',
    )
    strict_task = toy[1]
    reply = llm.complete(DISTIL_RECORD, distil | {"task": strict_task}).text
    assert reply.endswith("CONDITION: none") and parse_distil(reply)[1] == ""

    choices = {
        parse_judge(llm.complete(BEST_OF_N_JUDGE, {"task": t, "candidates": ["a", "b", "c"]}).text, 3)
        for t in toy
    }
    assert choices == {1, 2, 3}

    reflect_fields = {"task": task, "state": _state(task, 1), "feedback": "Wrong result set. Rows differ."}
    reflection = llm.complete(REFLECT, reflect_fields).text
    assert reflection == llm.complete(REFLECT, reflect_fields).text
    assert "Wrong result set" in reflection and reflection.count(". ") == 0 and reflection.endswith(".")


def test_tokens_are_counted_on_the_rendered_prompt(toy: list[Task]) -> None:
    llm = SimulatedLLM()
    fields = {"task": toy[0], "state": _state(toy[0], 0)}
    completion = llm.complete(DRAFT_ACTION, fields)
    joined = "\n".join(m["content"] for m in render(DRAFT_ACTION, fields).messages)
    assert completion.prompt_tokens == estimate_tokens(joined)
    assert completion.completion_tokens == estimate_tokens(completion.text)
    assert not completion.cached and not completion.estimated


def test_server_side_string_fields_give_identical_results(
    toy: list[Task], toy_lookup: dict[str, Task]
) -> None:
    """What the HTTP server does: string fields only (parse_rendered), task resolved by id."""
    in_process = SimulatedLLM(seed=7)
    server_side = SimulatedLLM(seed=7, task_lookup=toy_lookup)
    record = {"record": "r", "record_id": "x", "record_a_minus": "age >= 18", "record_a_plus": "age > 18"}
    for task in toy[:10]:
        for failures in (0, 1, 3):
            state = _state(task, failures)
            base = {"task": task, "state": state, "agent": "reflexion"}
            cases = {
                DRAFT_ACTION: base,
                REVISE_WITH_RECORD: base | record | {"draft": task.reference},
                GENERATE_LOCAL_ALTERNATIVES: base | {"action": task.reference},
                DISTIL_RECORD: base | {"a_minus": "age > 18", "a_plus": "age >= 18"},
                REFLECT: base | {"feedback": "Rows differ."},
                BEST_OF_N_JUDGE: base | {"candidates": ["a", "b"]},
            }
            for template, fields in cases.items():
                name, strings = parse_rendered(render(template, fields).messages)
                assert name == template
                assert server_side.complete(name, strings) == in_process.complete(template, fields)


def test_unresolvable_task_is_a_clear_error(toy: list[Task]) -> None:
    llm = SimulatedLLM(task_lookup=lambda task_id: None)
    _, strings = parse_rendered(render(DRAFT_ACTION, {"task": toy[0]}).messages)
    with pytest.raises(LLMError, match="llmtoy-000"):
        llm.complete(DRAFT_ACTION, strings)
    with pytest.raises(LLMError):
        SimulatedLLM().complete(DRAFT_ACTION, strings)  # no lookup at all


@pytest.mark.parametrize(
    "digest",
    [
        bytes(16),
        bytes(15) + b"\x01",
        bytes(4) + b"\x80" + bytes(11),
        b"\x00\x00\x00\x01" + bytes(12),
        bytes(range(16)),
    ]
    + [bytes.fromhex(f"{k:02x}" * 16) for k in (0x5A, 0xFF)],
)
def test_seed_words_give_the_integer_seeds_stream(digest: bytes) -> None:
    """`stable_rng` hands numpy the digest's 32-bit words, not the integer: the same entropy, so
    the same draws, for digests whose high words are zero too (numpy drops those from an int)."""
    import numpy as np

    from cm_gym.llm.simulated import _seed_words

    as_int = np.random.default_rng(int.from_bytes(digest, "big"))
    as_words = np.random.default_rng(_seed_words(digest))
    assert as_words.integers(0, 2**63, 16).tolist() == as_int.integers(0, 2**63, 16).tolist()


def test_memoised_draws_are_the_seeded_generators(toy: list[Task]) -> None:
    """`active_slips` and the fix draws read memoised uniforms: the very draws of the seeded
    generators the draft model made before (one per operator, in order; one per fix attempt)."""
    from cm_gym.llm.simulated import stable_rng

    llm = SimulatedLLM(seed=3)
    for task in toy:
        ops = llm._error_model(task.domain).operators
        rng = stable_rng(3, "slips", task.task_id)
        expected = [op.name for op in ops if rng.random() < op.probability(task)]
        for _ in range(2):  # drawn, then memoised
            assert [op.name for op in llm.active_slips(task)] == expected
        for op in ops:
            for fails in (1, 3):
                fixed = any(
                    stable_rng(3, "fix", task.task_id, op.name, i).random() < 0.45
                    for i in range(1, fails + 1)
                )
                assert llm._fixed(task, op, fails, 0.45) is fixed
