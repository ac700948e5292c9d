"""The alternative generator: LLM edits first, rule-based edits fill to K, distinct, never the original."""

from __future__ import annotations

import logging

import pytest
from memfakes import FakeLLM, ToyDomain, make_task

from cm_gym.agent import Cost
from cm_gym.core.types import AgentState, Outcome
from cm_gym.llm.errors import LLMError
from cm_gym.memory.alternatives import AlternativeGenerator

ACTION = "SELECT name FROM people WHERE age > 10"
FAILED = Outcome(0.0, False, "wrong rows")


def generate(llm: FakeLLM | None, k: int = 4, **kw: object) -> tuple[list, Cost]:
    cost = Cost()
    gen = AlternativeGenerator(llm, ToyDomain(), k, **kw)  # type: ignore[arg-type]
    return gen.generate(AgentState(make_task(0, "inclusive")), ACTION, FAILED, cost), cost


def test_llm_edits_come_first_then_rules_fill_the_free_slots() -> None:
    alts, cost = generate(FakeLLM())
    texts = [a.text for a in alts]
    # the fake LLM proposes DISTINCT then the flip; the rules would add the same two again
    assert [a.source for a in alts] == ["llm", "llm"]
    assert texts == [
        "SELECT DISTINCT name FROM people WHERE age > 10",
        "SELECT name FROM people WHERE age >= 10",
    ]
    assert cost.llm_calls == 1 and cost.tokens > 0


def test_rules_fill_when_the_llm_proposes_nothing_and_k_caps() -> None:
    alts, cost = generate(FakeLLM(alternatives="none"))
    assert [a.source for a in alts] == ["rule", "rule"] and cost.llm_calls == 1
    assert alts[0].unit == "comparison" and alts[0].text.endswith(">= 10")
    one, _ = generate(FakeLLM(), k=1)
    assert len(one) == 1 and one[0].source == "llm"
    assert generate(FakeLLM(), k=0)[0] == []


def test_candidates_are_distinct_and_differ_from_the_original() -> None:
    def parser(text: str, action: str) -> list[str]:
        return [
            action,
            "  " + action + " ",
            "SELECT name FROM people WHERE age >= 10",
            "SELECT name  FROM people WHERE age >= 10",
        ]

    alts, _ = generate(FakeLLM(), parser=parser)
    texts = [a.text for a in alts]
    assert ACTION not in texts
    assert texts[0] == "SELECT name FROM people WHERE age >= 10" and alts[0].source == "llm"
    assert len(texts) == len({" ".join(t.split()) for t in texts}) == 2  # + DISTINCT from the rules


def test_unparseable_reply_falls_back_to_rules(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        alts, _ = generate(FakeLLM(alternatives="broken"))
    assert [a.source for a in alts] == ["rule", "rule"]
    assert "EDIT" in caplog.text  # the prompts parser logs the raw reply


def test_llm_failure_falls_back_to_rules(caplog: pytest.LogCaptureFixture) -> None:
    class Down(FakeLLM):
        def complete(self, template, fields):  # type: ignore[no-untyped-def]
            raise LLMError("server down")

    with caplog.at_level(logging.WARNING):
        alts, cost = generate(Down())
    assert [a.source for a in alts] == ["rule", "rule"] and cost.llm_calls == 0
    assert "server down" in caplog.text
    assert [a.source for a in generate(None)[0]] == ["rule", "rule"]
