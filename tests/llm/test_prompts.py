"""Templates: rendering, tags, truncation, versions, the record renderings, parse_rendered."""

from __future__ import annotations

import difflib
import re
import string

import pytest

from cm_gym.core.types import TRUNCATION, AgentState, Attempt, Outcome, Task
from cm_gym.llm.base import (
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    RECORD_RENDER,
    REVISE_WITH_RECORD,
)
from cm_gym.llm.errors import PromptError
from cm_gym.llm.prompts import (
    CHAT_TEMPLATES,
    CONDITION_INSTRUCTION,
    parse_rendered,
    render,
    render_messages,
    render_record,
    template_version,
)


def _fields(task: Task, state: AgentState) -> dict[str, object]:
    return {
        "task": task,
        "state": state,
        "agent": "reflexion",
        "draft": "SELECT name FROM users WHERE age > 18",
        "record": "Situation: x",
        "record_id": "rec-1",
        "record_a_minus": "age > 18",
        "record_a_plus": "age >= 18",
        "action": "SELECT name\nFROM users\nWHERE age > 18",
        "a_minus": "age > 18",
        "a_plus": "age >= 18",
        "evidence": {"score_minus": 0.0, "score_plus": 1.0, "feedback_minus": "rows differ"},
        "candidates": ["SELECT 1", "SELECT 2", "SELECT 3"],
        "last_action": "SELECT 1",
        "feedback": "Wrong result set.",
    }


@pytest.fixture()
def task_state(toy: list[Task]) -> tuple[Task, AgentState]:
    task = toy[0]
    failed = Outcome(score=0.0, solved=False, feedback="Wrong result set.")
    state = (
        AgentState(task).with_attempt(Attempt("SELECT 1", failed)).with_attempt(Attempt("SELECT 2", failed))
    )
    return task, state


@pytest.mark.parametrize("name", sorted(CHAT_TEMPLATES))
def test_render_parse_roundtrip(name: str, task_state: tuple[Task, AgentState]) -> None:
    task, state = task_state
    rendered = render(name, _fields(task, state))
    template, fields = parse_rendered(rendered.messages)
    assert template == name
    assert fields == rendered.fields
    # string fields alone re-render the very same messages (what the server relies on)
    assert render_messages(name, fields) == rendered.messages
    system = rendered.messages[0]["content"]
    assert system.startswith(f"[cm_gym:{name} v{template_version(name)}]")


@pytest.mark.parametrize("name", sorted(CHAT_TEMPLATES))
def test_every_field_is_inside_its_tag(name: str) -> None:
    t = CHAT_TEMPLATES[name]
    for text in (t.system, t.user):
        for literal_before, field_name, _, _ in string.Formatter().parse(text):
            if field_name:
                assert re.search(rf"<{field_name}>\n?$", literal_before), (name, field_name)
        for field_name in t.field_names:
            assert text.count("{" + field_name + "}") == text.count(f"</{field_name}>")


def test_draft_renders_task_id_and_failed_attempts(task_state: tuple[Task, AgentState]) -> None:
    task, state = task_state
    rendered = render(DRAFT_ACTION, {"task": task, "state": state, "agent": "react"})
    user = rendered.messages[1]["content"]
    assert f"<task_id>{task.task_id}</task_id>" in user
    assert "<failed_attempts>2</failed_attempts>" in user
    assert "<decision>2</decision>" in user
    assert "Wrong result set." in user  # the state shows the last feedback


def test_fields_are_truncated_to_spec_limits(task_state: tuple[Task, AgentState]) -> None:
    task, state = task_state
    long = "x" * 10_000
    fields = _fields(task, state) | {"draft": long, "feedback": long, "state_text": long, "record": long}
    f = render(REVISE_WITH_RECORD, fields).fields
    assert len(f["draft"]) == TRUNCATION["draft"]
    assert len(f["state_text"]) == TRUNCATION["state"]
    assert len(f["record"]) == TRUNCATION["record"]
    g = render(GENERATE_LOCAL_ALTERNATIVES, fields).fields
    assert len(g["feedback"]) == TRUNCATION["feedback"]
    assert g["feedback"].endswith("...")


def test_distil_prompt_has_condition_instruction_and_predicate_kinds(
    task_state: tuple[Task, AgentState],
) -> None:
    task, state = task_state
    user = render(DISTIL_RECORD, _fields(task, state)).messages[1]["content"]
    assert CONDITION_INSTRUCTION in user
    assert 'Write "none" only if no such requirement exists.' in user
    assert 'mentions_any("phrase", ...)' in user
    assert "llmtoy_inclusive(...): the task asks for an inclusive boundary" in user  # the domain's own kind
    assert "score 0.00 -> 1.00" in user


def test_template_versions_and_unknown_names() -> None:
    assert template_version(RECORD_RENDER) == "1"
    assert all(template_version(name) for name in CHAT_TEMPLATES)
    with pytest.raises(PromptError):
        render("NO_SUCH_TEMPLATE", {})
    with pytest.raises(PromptError):
        render(RECORD_RENDER, {})  # a record rendering is not a chat prompt


def test_parse_rendered_rejects_foreign_messages(task_state: tuple[Task, AgentState]) -> None:
    task, state = task_state
    messages = render(DRAFT_ACTION, _fields(task, state)).messages
    with pytest.raises(PromptError, match="marker"):
        parse_rendered([{"role": "system", "content": "You are helpful."}, messages[1]])
    with pytest.raises(PromptError, match="another cm_gym version"):
        parse_rendered(
            [{"role": "system", "content": messages[0]["content"].replace(" v1]", " v0]")}, messages[1]]
        )
    with pytest.raises(PromptError, match="do not match"):
        parse_rendered([messages[0], {"role": "user", "content": "hello"}])
    with pytest.raises(PromptError):
        parse_rendered([messages[0]])


def test_record_render_differs_only_by_condition_clause() -> None:
    record = {
        "situation": "A numeric threshold predicate may omit its boundary value.",
        "a_minus": "SELECT name FROM users WHERE age > 18",
        "a_plus": "SELECT name FROM users WHERE age >= 18",
        "evidence": {"score_minus": 0.0, "score_plus": 1.0},
        "condition": 'mentions_any("at least") AND mentions_none("strictly")',
    }
    shown = render_record(record, show_condition=True)
    hidden = render_record(record, show_condition=False)
    diff = [d for d in difflib.ndiff(shown.splitlines(), hidden.splitlines()) if d[:2] in ("- ", "+ ")]
    assert diff == ['- Applies only when: mentions_any("at least") AND mentions_none("strictly")']
    # same holds for huge fields: no final cut can shift what else is shown
    huge = {k: (v * 200 if isinstance(v, str) else v) for k, v in record.items()}
    shown, hidden = render_record(huge, True), render_record(huge, False)
    assert len(shown) <= TRUNCATION["record"]
    assert [ln for ln in shown.splitlines() if not ln.startswith("Applies only when:")] == hidden.splitlines()
    # an empty condition is shown as explicitly always-applicable
    assert "Applies only when: always (no condition)" in render_record(record | {"condition": ""})
