"""The mechanism templates' parsers (and their fallbacks) and the simulated LLM's answers to them."""

from __future__ import annotations

import logging

import pytest

from cm_gym.llm.base import REVISE_WITH_GUIDANCE, REVISE_WITH_RECORD
from cm_gym.llm.parsers_mechanisms import (
    AttemptText,
    correction,
    example_block,
    parse_attempts,
    parse_importance,
    parse_labelled,
    parse_search,
    parse_skill,
    parse_strategy,
    render_attempts,
    stated_contrasts,
)
from cm_gym.llm.prompts import CHAT_TEMPLATES, parse_rendered, render
from cm_gym.llm.simulated import SimulatedLLM


def test_every_mechanism_template_renders_and_parses_back() -> None:
    for name in (
        "EXPEL_INSIGHT",
        "VOYAGER_SKILL",
        "REASONINGBANK_EXTRACT",
        "MATTS_SELF_CONTRAST",
        "REVISE_WITH_GUIDANCE",
    ):
        t = CHAT_TEMPLATES[name]
        fields = {f: f"<{f} value>" for f in t.field_names}
        rendered = render(name, fields)
        assert parse_rendered(rendered.messages) == (name, rendered.fields)


def test_parsers_fall_back_as_documented(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert parse_importance("IMPORTANCE: 42") == 10
        assert parse_importance("I would say 3.") == 3
        assert parse_importance("no idea") == 5
        assert parse_labelled("just a lesson", "INSIGHT", "EXPEL_INSIGHT") == "just a lesson"
        skill = parse_skill("Sort first.\nthen scan")
        assert skill.name == "Sort first." and skill.steps.startswith("Sort first.")
        strategy = parse_strategy("OUTCOME: maybe\nTITLE: t\nCONTENT: c")
        assert strategy.success is None and strategy.title == "t" and strategy.description == "OUTCOME: maybe"
        assert parse_search("I will look it up", "the question") == "the question"
    assert "no number" in caplog.text and "no INSIGHT" in caplog.text
    assert parse_search("SEARCH: none", "q") is None
    assert parse_strategy("OUTCOME: failure\nTITLE: a\nDESCRIPTION: b\nCONTENT: c").success is False


def test_worked_examples_survive_labelled_fields() -> None:
    reply = "INSIGHT: use the boundary\n" + example_block("a > 1", "a >= 1")
    assert stated_contrasts(parse_labelled(reply, "INSIGHT", "EXPEL_INSIGHT")) == [("a > 1", "a >= 1")]
    strategy = parse_strategy("TITLE: t\nDESCRIPTION: d\nCONTENT: c\n" + example_block("x", "y"))
    assert stated_contrasts(strategy.content) == [("x", "y")]


def test_trajectories_round_trip_and_their_corrections_are_read() -> None:
    a = [
        AttemptText("q1", "wrong", False, 0.0),
        AttemptText("q2", "wrong", False, 0.4),
        AttemptText("q3", "ok", True, 1.0),
    ]
    text = render_attempts(a, scores=True)
    assert [x.action for x in parse_attempts(text)] == ["q1", "q2", "q3"]
    assert parse_attempts(text)[1].score == pytest.approx(0.4)
    assert correction(a) == ("q2", "q3")
    assert correction(
        [AttemptText("q", "", False, 0.2), AttemptText("r", "", False, 0.6)], by_score=True
    ) == ("q", "r")
    assert correction([AttemptText("q", "", True, 1.0)]) is None
    # two trajectories in one text: numbering restarts, each yields its own correction
    two = (
        render_attempts(a[1:])
        + "\n\n"
        + render_attempts([AttemptText("p", "", False), AttemptText("s", "", True)])
    )
    assert stated_contrasts(two) == [("q2", "q3"), ("p", "s")]
    # a long trajectory keeps the most recent attempts and says what it left out
    long = [AttemptText("x" * 900 + str(i), "f", False) for i in range(5)]
    kept = render_attempts(long, limit=3000)
    assert "earlier attempt(s) omitted" in kept and parse_attempts(kept)[-1].action.endswith("4")


def test_guided_revision_goes_through_the_record_revision_model(sql_tasks: dict) -> None:
    """REVISE_WITH_GUIDANCE applies each worked example exactly as REVISE_WITH_RECORD would, and
    leaves the draft alone when the guidance shows no change."""
    sim = SimulatedLLM(seed=3, task_lookup=sql_tasks)
    task = next(t for t in sql_tasks.values() if ">=" in t.reference)
    draft = task.reference.replace(">=", ">", 1)
    before, after = "SELECT name FROM t WHERE age > 18", "SELECT name FROM t WHERE age >= 18"
    guidance = "[1] a lesson\n" + example_block(before, after)
    base = {"task": task, "agent": "react", "decision": 0, "draft": draft}
    guided = sim.complete(REVISE_WITH_GUIDANCE, {**base, "guidance": guidance, "mechanism": "M"})
    direct = sim.complete(
        REVISE_WITH_RECORD,
        {**base, "record": guidance, "record_id": "M-1", "record_a_minus": before, "record_a_plus": after},
    )
    assert guided.text == direct.text
    assert task.reference in guided.text  # the example's boundary correction was transferred
    plain = sim.complete(
        REVISE_WITH_GUIDANCE, {**base, "guidance": "[1] be careful with boundaries", "mechanism": "M"}
    )
    assert draft in plain.text
    assert (
        guided.prompt_tokens > 0 and guided.prompt_tokens != direct.prompt_tokens
    )  # counted on its own prompt
