"""Reply parsers and their fallbacks: edit grammar, DISTIL_RECORD, BEST_OF_N_JUDGE."""

from __future__ import annotations

import logging
import random

import pytest

from cm_gym.llm.parsers import apply_edit, format_alternatives, parse_alternatives, parse_distil, parse_judge

ACTION = "SELECT name FROM users WHERE age > 18 AND score > 18 ORDER BY name"


def test_parse_alternatives_applies_valid_edits_and_skips_invalid(caplog: pytest.LogCaptureFixture) -> None:
    reply = (
        "EDIT 1\nREPLACE:\nage > 18\nWITH:\nage >= 18\n\n"
        "EDIT 2\nREPLACE:\n> 18\nWITH:\n>= 18\n\n"  # occurs twice: ambiguous
        "EDIT 3\nREPLACE:\nheight > 2\nWITH:\nheight >= 2\n\n"  # absent
        "EDIT 4\nREPLACE: ORDER BY name\nWITH: ORDER BY name DESC\n\n"  # same-line form
        "EDIT 5\nREPLACE:\n" + ACTION + "\nWITH:\nSELECT 1\n\n"  # whole submission
        "EDIT 6\nREPLACE:\nage > 18\n\n"  # no WITH
        "EDIT 7\nREPLACE:\n`age > 18`\nWITH:\n`age >= 18`\n"  # duplicate of edit 1, backticked
    )
    with caplog.at_level(logging.WARNING, logger="cm_gym.llm.parsers"):
        out = parse_alternatives(reply, ACTION)
    assert out == [
        ACTION.replace("age > 18", "age >= 18"),
        ACTION.replace("ORDER BY name", "ORDER BY name DESC"),
    ]
    skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 4  # edits 2, 3, 5, 6


def test_parse_alternatives_without_grammar_returns_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cm_gym.llm.parsers"):
        assert parse_alternatives("Here is a better query: SELECT 1", ACTION) == []
    assert "SELECT 1" in caplog.text  # the raw reply is logged


@pytest.mark.parametrize(
    "edited",
    [
        ACTION.replace("score > 18", "score >= 18"),  # the second of two identical '>' tokens
        ACTION.replace(" ORDER BY name", ""),  # deletion at the end
        ACTION.replace("SELECT name", "SELECT DISTINCT name"),  # insertion
        ACTION.replace("18", "21", 1),
    ],
)
def test_format_then_parse_roundtrip(edited: str) -> None:
    reply = format_alternatives(ACTION, [edited])
    assert reply.startswith("EDIT 1\nREPLACE:\n")
    assert parse_alternatives(reply, ACTION) == [edited]


def test_format_alternatives_multiline_and_unexpressible() -> None:
    action = "def f(x):\n    return x + 1\n\ndef g(x):\n    return x + 1\n"
    edited = action.replace("return x + 1\n\ndef g", "return x - 1\n\ndef g")
    reply = format_alternatives(action, [edited, action])  # the unchanged one is left out
    assert reply.count("EDIT ") == 1
    assert parse_alternatives(reply, action) == [edited]


def test_apply_edit_rules() -> None:
    assert apply_edit("a > 1", ">", ">=") == "a >= 1"
    assert apply_edit("a > 1 > 2", ">", ">=") is None  # not unique
    assert apply_edit("a > 1", "a > 1", "b") is None  # complete replacement
    assert apply_edit("a > 1", ">", ">") is None  # no change
    assert apply_edit("a", "a", "b") == "b"  # a one-token action may be replaced


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            'SITUATION: Boundary slips.\nCONDITION: mentions_any("at least")',
            ("Boundary slips.", 'mentions_any("at least")'),
        ),
        ("SITUATION: Boundary slips.\nCONDITION: none", ("Boundary slips.", "")),
        ('SITUATION: s\nCONDITION: "None".', ("s", "")),
        ("situation: s\n\ncondition:   NONE  ", ("s", "")),
        ('SITUATION: a\nmore\nCONDITION: x("1") AND\n  y("2")', ("a more", 'x("1") AND y("2")')),
    ],
)
def test_parse_distil(reply: str, expected: tuple[str, str]) -> None:
    assert parse_distil(reply) == expected


def test_parse_distil_missing_lines_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cm_gym.llm.parsers"):
        assert parse_distil("I think this is useful.") == ("", "")
        assert parse_distil("SITUATION: only a situation") == ("only a situation", "")
    assert "I think this is useful." in caplog.text


def test_parse_judge(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_judge("Reasoning...\nCHOICE: 3", 5) == 3
    assert parse_judge("choice: [2]", 5) == 2
    with caplog.at_level(logging.WARNING, logger="cm_gym.llm.parsers"):
        assert parse_judge("CHOICE: 9", 5) == 1
        assert parse_judge("the second one", 5) == 1
    assert len([r for r in caplog.records if "falling back to 1" in r.getMessage()]) == 2
    assert "the second one" in caplog.text


def test_format_parse_roundtrip_property() -> None:
    """Seeded random one-token edits: whatever format_alternatives writes, parse_alternatives turns
    back into exactly the edited action."""
    rng = random.Random(0)
    vocab = ["age", "x", ">", ">=", "(", ")", "1", "18", ",", "SELECT", "\n", "  "]
    written = 0
    for _ in range(600):
        tokens = [rng.choice(vocab) for _ in range(rng.randint(2, 10))]
        edited_tokens = list(tokens)
        i = rng.randrange(len(tokens))
        kind = rng.choice(["replace", "insert", "delete"])
        if kind == "replace":
            edited_tokens[i] = rng.choice(vocab)
        elif kind == "insert":
            edited_tokens.insert(i, rng.choice(vocab))
        else:
            del edited_tokens[i]
        action, edited = " ".join(tokens), " ".join(edited_tokens)
        if action.strip() == edited.strip():
            continue
        reply = format_alternatives(action, [edited])
        if reply:
            written += 1
            assert parse_alternatives(reply, action) == [edited], (action, edited, reply)
    assert written > 300


def test_labelled_fields_of_real_replies() -> None:
    """Reasoning sections set aside, Markdown around labels, a repeated field keeps its first value."""
    from cm_gym.llm.parsers_mechanisms import parse_importance, parse_search, parse_skill, parse_strategy

    reply = (
        "<think>NAME: wrong</think>\n**NAME:** bound-check\n**DESCRIPTION:** when x\n## STEPS:\n1. a\n2. b"
    )
    assert parse_skill(reply) == parse_skill("NAME: bound-check\nDESCRIPTION: when x\nSTEPS: 1. a\n2. b")
    strategy = parse_strategy("TITLE: a\nDESCRIPTION: b\nTITLE: c\nCONTENT: d\ne")
    assert (strategy.title, strategy.description, strategy.content) == ("a", "b", "d\ne")
    assert parse_importance("<think>maybe 9</think>**IMPORTANCE:** 3") == 3
    assert parse_search("- **SEARCH:** join keys", "q") == "join keys"
    assert parse_judge("<think>CHOICE: 4</think>CHOICE: 2", 4) == 2
