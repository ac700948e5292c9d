"""Conditions: grammar, canonical text round-trip, holds(), and the unparseable → none fallback."""

from __future__ import annotations

import logging

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import (
    EMPTY,
    Condition,
    Predicate,
    condition_overlap,
    describe_predicates,
    parse_condition,
    parse_condition_or_none,
    parse_syntax,
)
from cm_gym.memory.errors import ConditionParseError


def task(prompt: str = "List people whose age is at least 18.", **kw: object) -> Task:
    fields: dict[str, object] = {
        "task_id": "t1",
        "domain": "memtoy",
        "prompt": prompt,
        "env_id": "concert_singer",
        "reference": "",
        "family": "boundary",
        "features": {"boundary": "inclusive", "n_rows": 12, "has_null": False, "kind": "numeric"},
    }
    fields.update(kw)
    return Task(**fields)  # type: ignore[arg-type]


def test_parse_gives_sorted_deduplicated_canonical_text() -> None:
    c = parse_condition(
        'mentions_none("strictly") AND mentions_any("at least", "no fewer than") and mentions_none("strictly")'
    )
    assert c.predicates == (
        Predicate("mentions_any", ("at least", "no fewer than")),
        Predicate("mentions_none", ("strictly",)),
    )
    assert c.text == 'mentions_any("at least", "no fewer than") AND mentions_none("strictly")'


@pytest.mark.parametrize(
    "text",
    [
        'mentions_any("at least", "no fewer than") AND mentions_none("strictly")',
        "feature_equals(n_rows, 12) AND same_env(concert_singer)",
        "feature_in('kind', 'numeric', 'date')",
        'mentions_any("say \\"hi\\"", "tab\\there", "ünï")',
        "family_is(boundary)",
    ],
)
def test_canonical_text_round_trips(text: str) -> None:
    c = parse_condition(text)
    again = parse_condition(c.text)
    assert again == c
    assert again.text == c.text
    assert parse_syntax(c.text) == c.predicates


def test_bare_numbers_and_identifiers_become_strings() -> None:
    c = parse_condition("feature_equals(n_rows, 12)")
    assert c.predicates[0].args == ("n_rows", "12")
    assert c.text == 'feature_equals("n_rows", "12")'


@pytest.mark.parametrize("text", ["", "none", "None", "  NONE  "])
def test_none_or_empty_is_always_applicable(text: str) -> None:
    c = parse_condition(text)
    assert c.is_empty and c.text == "" and str(c) == "none"
    assert c.holds(task("anything"))


def test_mentions_is_case_insensitive_and_word_bounded() -> None:
    c = parse_condition('mentions_any("at least")')
    assert c.holds(task("Ages AT   LEAST 18"))
    assert not c.holds(task("ages at leastwise 18"))
    assert not c.holds(task("ages strictly above 18"))
    none = parse_condition('mentions_none("strictly", "more than")')
    assert none.holds(task("ages at least 18"))
    assert not none.holds(task("ages more than 18"))


def test_generic_kinds_hold_on_task_fields() -> None:
    t = task()
    preds = {
        'same_env("concert_singer")': True,
        'same_env("other")': False,
        'different_env("other")': True,
        'feature_equals("n_rows", 12)': True,
        'feature_equals("n_rows", "12.0")': True,
        'feature_equals("n_rows", 13)': False,
        'feature_equals("has_null", "false")': True,
        'feature_equals("missing", "x")': False,
        'feature_in("kind", "date", "numeric")': True,
        'feature_in("kind", "date", "text")': False,
        'family_is("boundary")': True,
        'family_is("join")': False,
    }
    for text, expected in preds.items():
        assert parse_condition(text).holds(t) is expected, text


def test_conjunction_needs_every_predicate() -> None:
    c = parse_condition('mentions_any("at least") AND same_env("other")')
    assert not c.holds(task())
    c2 = parse_condition('mentions_any("at least") AND same_env("concert_singer")')
    assert c2.holds(task())


def test_domain_kinds_are_parsed_and_called() -> None:
    seen: list[tuple[str, ...]] = []

    def numeric(t: Task, args: tuple[str, ...]) -> bool:
        seen.append(args)
        return t.features.get("kind") == args[0]

    c = parse_condition('toy_kind("numeric") AND mentions_any("at least")', {"toy_kind": numeric})
    assert c.holds(task())
    assert not c.holds(task(features={"kind": "text"}))
    assert seen == [("numeric",), ("numeric",)]
    with pytest.raises(ConditionParseError, match="unknown predicate kind"):
        parse_condition('toy_kind("numeric")')  # without the domain's kinds


@pytest.mark.parametrize(
    "text",
    [
        'mentions_any("at least"',
        'mentions_any("at least") AND',
        'mentions_any("at least") OR mentions_none("x")',
        'mentions_any("unterminated)',
        "question is inclusive",
        'mentions_any("a") mentions_none("b")',
        "same_env(a, b)",
        "feature_equals(x)",
        "mentions_any()",
        'nope("x")',
    ],
)
def test_bad_conditions_raise(text: str) -> None:
    with pytest.raises(ConditionParseError):
        parse_condition(text)


def test_unparseable_condition_becomes_none_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cm_gym.domains.conditions"):
        c = parse_condition_or_none("the question sounds inclusive")
    assert c == EMPTY and c.holds(task())
    assert "unparseable condition" in caplog.text


def test_predicate_that_raises_counts_as_false(caplog: pytest.LogCaptureFixture) -> None:
    def boom(t: Task, args: tuple[str, ...]) -> bool:
        raise RuntimeError("bug")

    c = parse_condition("toy_boom()", {"toy_boom": boom})
    with caplog.at_level(logging.WARNING):
        assert c.holds(task()) is False
    assert "raised" in caplog.text


def test_unbound_condition_refuses_to_evaluate() -> None:
    with pytest.raises(ValueError, match="not bound"):
        Condition((Predicate("mentions_any", ("x",)),)).holds(task())


def test_condition_overlap() -> None:
    a = 'mentions_any("at least") AND mentions_none("strictly")'
    assert condition_overlap(a, a) == 1.0
    assert condition_overlap(a, "") == 1.0
    assert condition_overlap(a, 'mentions_any("strictly")') == 0.0
    assert condition_overlap(a, 'mentions_any("at least")') == pytest.approx(0.5)


def test_describe_predicates_lists_generic_and_domain_kinds() -> None:
    def sql_numeric(t: Task, args: tuple[str, ...]) -> bool:
        """The column has a numeric type."""
        return True

    text = describe_predicates({"sql_numeric": sql_numeric})
    assert "mentions_any" in text and "sql_numeric(...) - The column has a numeric type." in text


def test_mentions_any_is_one_search_with_the_meaning_of_each_phrase_alone() -> None:
    """`mentions_any` / `mentions_none` search all phrases with one regex (issue 35 item 1): it
    must hold exactly where some phrase alone is mentioned (prefixes, overlaps, case, spacing,
    punctuation, an empty phrase)."""
    import random

    from cm_gym.domains import conditions as C

    words = ["top", "top ten", "ten", "a-b", "x.y", "", "  ", "Ten", "tEN tOp", "(n)", "n", "é", "ab"]
    texts = ["", "top", "tops", "the top  ten!", "A-B c", "x.y.z", "(n) is", "stop ten", "é ab", "abc"]
    rng = random.Random(0)
    for _ in range(600):
        phrases = tuple(rng.sample(words, rng.randint(1, 4)))
        for text in texts:
            alone = any(C.mentions(text, p) for p in phrases)
            assert C._mentions_any_of(text, phrases) is alone, (text, phrases)
