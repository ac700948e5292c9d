"""Issue 14, Dafny: annotation tricks that made unproved programs "verified" are refused, because
what changed is decided on Dafny's own token stream (comments removed as Dafny removes them).
Fuzzed: the tokenizer and the checker on random insertions of comment, string and code pieces."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.tokens import tokenize
from cm_gym.types import Action, AgentState, Task

SUM = """method Sum(n: nat) returns (s: nat)
  ensures s == n * (n + 1) / 2
{
  s := 0;
  var i := 0;
  while i < n
  {
    i := i + 1;
    s := s + i;
  }
}
"""
COLLATZ = """method Collatz(n: nat)
{
  var x := n;
  while x > 1
  {
    if x % 2 == 0 { x := x / 2; } else { x := 3 * x + 1; }
  }
}
"""
AFTER_LOOP = "  }\n}"


def _after_loop(text: str) -> str:
    return SUM.replace(AFTER_LOOP, "  }\n" + text + "\n}")


#: (name, program, action): each one verifies with Dafny 2.3 or changes the program; all refused
PROBES = [
    ("code_after_annotation_on_the_same_line", SUM, _after_loop("  assert true; s := n * (n + 1) / 2;")),
    ("assume_hidden_between_comment_markers_in_strings", SUM,
     _after_loop('  assert "/*" != "";\n  assume false;\n  assert "*/" != "";')),
    ("code_hidden_between_comment_markers_in_strings", SUM,
     _after_loop('  assert "/*" != "";\n  s := n * (n + 1) / 2;\n  assert "*/" != "";')),
    ("decreases_star_on_method_and_loop", COLLATZ,
     COLLATZ.replace("(n: nat)\n", "(n: nat)\n  decreases *\n").replace("x > 1\n", "x > 1\n    decreases *\n")),
    ("decreases_star_in_a_list", COLLATZ, COLLATZ.replace("x > 1\n", "x > 1\n    decreases x, *\n")),
    ("assume", SUM, _after_loop("  assume s == n * (n + 1) / 2;")),
    ("assume_after_isolated_cr_ending_a_line_comment", SUM, _after_loop("  // note\r  assume false;")),
    ("axiom_attribute", SUM, _after_loop("  assert {:axiom} s == n * (n + 1) / 2;")),
    ("attribute_split_over_lines", SUM, _after_loop("  assert {:\n   axiom} s == n * (n + 1) / 2;")),
    ("verify_false_attribute_in_loop_header", SUM, SUM.replace("while i < n\n", "while i < n\n    invariant {:verify false} true\n")),
    ("new_statement", SUM, _after_loop("  s := n * (n + 1) / 2;")),
    ("new_loop", SUM, _after_loop("  while true decreases * { }")),
    ("new_loop_inside_an_assertion_line", SUM, _after_loop("  assert true; while true { }")),
    ("body_change", SUM, SUM.replace("s := s + i;", "s := s + i + 0;")),
    ("removed_statement", SUM, SUM.replace("    s := s + i;\n", "")),
    ("weakened_postcondition", SUM, SUM.replace("ensures s == n * (n + 1) / 2", "ensures true")),
    ("unterminated_block_comment_hides_the_rest", SUM, SUM.replace("  s := 0;\n", "  s := 0;\n  /*\n")),
    ("verbatim_string_hides_nothing", SUM, _after_loop('  assert @"*/ assume false; /*" != "";\n  assume false;')),
    ("invariant_followed_by_code", SUM, SUM.replace("while i < n\n", "while i < n\n    invariant true s := 0;\n")),
    ("assertion_swallowing_a_statement", SUM, SUM.replace("    s := s + i;\n", "    assert s := s + i;\n")),
    ("lemma_added", SUM, SUM + "lemma {:axiom} Cheat() ensures false\n"),
    ("include_added", SUM, 'include "/etc/passwd"\n' + SUM),
]  # fmt: skip


@pytest.mark.parametrize(("name", "program", "action"), PROBES, ids=[p[0] for p in PROBES])
def test_annotation_trick_is_refused_with_a_reason(name: str, program: str, action: str) -> None:
    with pytest.raises(AnnotationError) as info:
        extract_annotations(program, action)
    assert str(info.value)


def test_refusal_is_a_scored_outcome_not_an_exception() -> None:
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator

    evaluator = DafnyEvaluator.__new__(DafnyEvaluator)  # the check refuses before any verifier runs
    evaluator.calls = 0
    task = Task("dafny-probe", "dafny", "p", "probe", SUM, meta={"program": SUM})
    outcome = evaluator.check(AgentState(task), Action(_after_loop("  assert true; s := n * (n + 1) / 2;")))
    assert outcome.status == "error" and outcome.score == 0.0 and not outcome.solved and outcome.reason


def test_comments_are_removed_as_dafny_removes_them() -> None:
    nested = _after_loop("  /* outer /* inner */ assume false; still comment */")
    assert extract_annotations(SUM, nested) == []  # Dafny nests: nothing was added
    verbatim = _after_loop('  assert @"a "" // */ b" != "";')
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
        verifier = DafnyVerifier(time_limit=20)
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
