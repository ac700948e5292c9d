"""Issue 14, Dafny: annotation tricks that made unproved programs "verified" are refused, because
what changed is decided on Dafny's own token stream (comments removed as Dafny removes them).
Fuzzed: the tokenizer and the checker on random insertions of comment, string and code pieces."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.hostile import AFTER_LOOP, PROBES, SUM, after_loop
from cm_gym.domains.dafny.tokens import tokenize


@pytest.mark.parametrize(("name", "kind", "program", "action"), PROBES, ids=[p[0] for p in PROBES])
def test_annotation_trick_is_refused_with_a_reason(name: str, kind: str, program: str, action: str) -> None:
    with pytest.raises(AnnotationError) as info:
        extract_annotations(program, action)
    assert str(info.value)


def test_refusal_is_a_scored_outcome_not_an_exception() -> None:
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator

    evaluator = DafnyEvaluator.__new__(DafnyEvaluator)  # the check refuses before any verifier runs
    evaluator.calls = 0
    task = Task("dafny-probe", "dafny", "p", "probe", SUM, meta={"program": SUM})
    outcome = evaluator.check(AgentState(task), Action(after_loop("  assert true; s := n * (n + 1) / 2;")))
    assert outcome.status == "error" and outcome.score == 0.0 and not outcome.solved and outcome.reason


def test_comments_are_removed_as_dafny_removes_them() -> None:
    nested = after_loop("  /* outer /* inner */ assume false; still comment */")
    assert extract_annotations(SUM, nested) == []  # Dafny nests: nothing was added
    verbatim = after_loop('  assert @"a "" // */ b" != "";')
    assert [a.keyword for a in extract_annotations(SUM, verbatim)] == ["assert"]
    toks = [t.text for t in tokenize("x'/*c*/ 'a' 'b'c \"//\" y // z\r w /* /* */ */ v")]
    assert toks == ["x'", "'a'", "'b'c", '"//"', "y", "w", "v"]


def test_allowed_annotations_are_accepted_with_optional_semicolons_and_comments() -> None:
    action = SUM.replace(
        "while i < n\n",
        "while i < n // loop\n    invariant 0 <= i <= n; /* bound */\n    invariant s == i * (i + 1) / 2\n"
        "    decreases n - i\n",
    ).replace("    s := s + i;\n  }\n", "    s := s + i;\n  }\n  assert i == n;\n")
    anns = extract_annotations(SUM, action)
    assert [a.keyword for a in anns] == ["invariant", "invariant", "decreases", "assert"]
    assert anns[0].text == "invariant 0 <= i <= n;"


# -- fuzzing ------------------------------------------------------------------------------------
PIECES = ["/*", "*/", "//", "\n", "\r", " ", '"', "'", "@\"", "assume", "assert", "invariant", "decreases",
          "true", ";", "{", "}", "{:", "axiom", "*", "s := 0;", "x'", "\\", "a"]  # fmt: skip
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_tokenizer_is_total_ordered_and_skips_only_whitespace_and_comments(text: str) -> None:
    toks = tokenize(text)
    pos = 0
    for tok in toks:
        assert tok.start >= pos and text[tok.start : tok.end] == tok.text and tok.text
        gap = text[pos : tok.start]
        assert not gap.strip() or "/*" in gap or "//" in gap
        pos = tok.end


@FUZZ
@given(
    st.integers(0, SUM.count("\n")), st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)
)
def test_accepted_insertions_only_add_checked_annotations(line: int, junk: str) -> None:
    """Insert random text anywhere: either it is refused, or every added token belongs to a
    reported annotation that contains no forbidden construct."""
    lines = SUM.splitlines(keepends=True)
    action = "".join(lines[:line]) + junk + "\n" + "".join(lines[line:])
    try:
        anns = extract_annotations(SUM, action)
    except AnnotationError:
        return
    covered = [a.span for a in anns if a.span]
    extra = [t for t in tokenize(action) if not any(a <= t.start < b for a, b in covered)]
    assert [t.text for t in extra] == [t.text for t in tokenize(SUM)]
    for ann in anns:
        words = [t.text for t in tokenize(ann.text)]
        assert "assume" not in words and "{:" not in words and ":=" not in words
        assert not (ann.keyword == "decreases" and words[1:] == ["*"])


@pytest.mark.dafny
def test_dafny_agrees_with_the_tokenizer_on_comment_edge_cases(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Dafny itself: a nested comment hides `assume false` (so the unproved method still fails),
    an isolated CR ends a line comment (so `assume false` after it is code and verifies)."""
    from cm_gym.domains.dafny.verifier import DafnyVerifier
    from cm_gym.evaluators.sandbox import ToolNotFoundError

    try:
        verifier = DafnyVerifier()
    except ToolNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"dafny is missing in CI: {exc}")
        pytest.skip(str(exc))
    nested = SUM.replace("Sum", "Nested").replace(AFTER_LOOP, "  }\n  /* /* */ assume false; */\n}")
    cr = SUM.replace("Sum", "Cr").replace(AFTER_LOOP, "  }\n  // c\r  assume false;\n}")
    report, _ = verifier.verify(nested + cr)
    assert report.members.get("Nested") is False and report.members.get("Cr") is True
    assert [t.text for t in tokenize(nested)].count("assume") == 0
    assert [t.text for t in tokenize(cr)].count("assume") == 1
