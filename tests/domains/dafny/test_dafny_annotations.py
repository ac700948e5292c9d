"""The Dafny action format: the task's program plus annotation lines, and what is refused."""

from __future__ import annotations

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.dafny.annotations import (
    AnnotationError,
    extract_annotations,
    insert_after,
    remove_annotation,
    replace_annotation,
)
from cm_gym.domains.dafny.hostile import SUM

PROGRAM = SUM  # the hints-removed Sum program of the probe corpus
ANNOTATED = PROGRAM.replace(
    "  while i < n\n",
    "  while i < n\n    invariant 0 <= i <= n\n    invariant s == i * (i + 1) / 2\n    decreases n - i\n",
)


def test_annotations_are_extracted_one_per_unit() -> None:
    anns = extract_annotations(PROGRAM, ANNOTATED)
    assert [a.keyword for a in anns] == ["invariant", "invariant", "decreases"]
    assert anns[0].text == "invariant 0 <= i <= n" and anns[0].line == 6


def test_whitespace_comments_and_multi_line_annotations_are_accepted() -> None:
    action = ANNOTATED.replace("    s := s + i;", "      s := s + i;   // add").replace(
        "    decreases n - i\n",
        "    decreases n - i // bound\n    invariant forall k :: 0 <= k < i ==>\n      k < n\n",
    )
    anns = extract_annotations(PROGRAM, action)
    assert anns[-1].text == "invariant forall k :: 0 <= k < i ==>\nk < n"
    assert extract_annotations(PROGRAM, PROGRAM) == []


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda a: a.replace("ensures s == n * (n + 1) / 2", "ensures true"), "changed or removed"),
        (lambda a: a.replace("    s := s + i;\n", ""), "changed or removed"),
        (lambda a: a.replace("    decreases n - i\n", "    assume s == n;\n"), "forbidden"),
        (lambda a: a.replace("    decreases n - i\n", "    assert {:verify false} true;\n"), "forbidden"),
        (lambda a: a.replace("    decreases n - i\n", "    s := 0;\n"), "not an annotation"),
        (lambda a: a.replace("    decreases n - i\n", "    requires n > 0\n"), "not an annotation"),
        (lambda a: a.replace("    decreases n - i\n", "    /*\n"), "block comment"),
        (
            lambda a: a.replace("    decreases n - i\n", "    decreases n - i\n    x := 1;\n"),
            "not an annotation",
        ),
    ],
)
def test_anything_but_annotations_is_refused(edit, why: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AnnotationError, match=why):
        extract_annotations(PROGRAM, edit(ANNOTATED))


def test_remove_replace_insert_change_one_annotation() -> None:
    anns = extract_annotations(PROGRAM, ANNOTATED)
    dropped = remove_annotation(ANNOTATED, anns[1])
    assert [a.text for a in extract_annotations(PROGRAM, dropped)] == [
        "invariant 0 <= i <= n",
        "decreases n - i",
    ]
    swapped = replace_annotation(ANNOTATED, anns[0], "invariant 0 <= i < n")
    assert [a.text for a in extract_annotations(PROGRAM, swapped)][0] == "invariant 0 <= i < n"
    added = insert_after(PROGRAM, 5, "invariant i <= n")
    assert [a.text for a in extract_annotations(PROGRAM, added)] == ["invariant i <= n"]


@pytest.mark.data
def test_ground_truths_are_their_program_plus_annotations(dafny_tasks: list[Task]) -> None:
    """Every ground truth the loader serves is its program plus accepted annotations (issue 25:
    ghost statements included), and removing them gives the program back; the pairs dropped are
    the ones upstream's hint removal damaged or that weaken a method's termination claim."""
    assert len(dafny_tasks) == 436
    counts: dict[str, int] = {}
    proved_by = 0
    for t in dafny_tasks:
        anns = extract_annotations(t.meta["program"], t.reference)
        proved_by += sum(" by" in a.text for a in anns)
        assert (not anns) == t.meta["hints_identical"] or not anns, t.meta["file"]
        for a in anns:
            counts[a.keyword] = counts.get(a.keyword, 0) + 1
        if any(a.absorbed for a in anns):
            continue  # part of its program text sits inside an annotation: not removable alone
        stripped = t.reference
        for a in sorted(anns, key=lambda a: -(a.span or (0, 0))[0]):
            stripped = remove_annotation(stripped, a)
        assert extract_annotations(t.meta["program"], stripped) == [], t.meta["file"]
    assert min(counts["invariant"], counts["assert"], counts["decreases"]) > 100
    assert proved_by >= 20  # ``assert … by { … }``: refused before issue 25


@pytest.mark.data
def test_the_loader_drops_only_ground_truths_that_are_not_program_plus_annotations(shared_data) -> None:  # type: ignore[no-untyped-def]
    from cm_gym.domains.base import LoadReport
    from cm_gym.domains.dafny.loader import load_dafny_tasks

    report = LoadReport()
    tasks = load_dafny_tasks(shared_data / "dafny", report=report)
    assert len(tasks) + len(report.dropped) == 445 and not report.refused
    reasons = [why for _, why in report.dropped]
    allowed = ("'decreases *'", "may not be changed", "loop header or specification")
    assert len(reasons) <= 9 and all(any(a in why for a in allowed) for why in reasons), reasons
    assert len({t.task_id for t in tasks}) == len(tasks) and tasks[-1].task_id == "dafny-0444"


# -- issue 25: what a proof author writes is accepted ---------------------------------------------
COLLATZ_STAR = """method Collatz(n: nat)
  decreases *
{
  var x := n;
  while x > 1
  {
    if x % 2 == 0 { x := x / 2; } else { x := 3 * x + 1; }
  }
}

function method Pow2(n: nat): nat { if n == 0 then 1 else 2 * Pow2(n - 1) }

lemma Pow2Positive(n: nat)
  ensures Pow2(n) > 0
{
}

method Positive(n: nat) returns (r: nat)
  ensures r > 1
{
  r := Pow2(n) + 1;
}
"""
#: the ground truth of COLLATZ_STAR: a loop ``decreases *`` (its method declares one) and an
#: ``assert … by`` whose proof calls the program's lemma
COLLATZ_PROVED = COLLATZ_STAR.replace("  while x > 1\n", "  while x > 1\n    decreases *\n").replace(
    "  r := Pow2(n) + 1;\n", "  assert Pow2(n) > 0 by { Pow2Positive(n); }\n  r := Pow2(n) + 1;\n"
)


@pytest.mark.parametrize(
    "inserted",
    [
        "  assert Pow2(n) > 0 by { Pow2Positive(n); }\n",
        "  assert p: Pow2(n) > 0 by { Pow2Positive(n); }\n  assert Pow2(n) + 1 > 1 by { reveal p; }\n",
        "  calc { Pow2(n) + 1; > { Pow2Positive(n); } 1; }\n",
        "  calc == { Pow2(n + 1); 2 * Pow2(n); }\n",
        "  ghost var k := Pow2(n);\n  Pow2Positive(n);\n",
        "  forall m: nat | m < n ensures Pow2(m) > 0 { Pow2Positive(m); }\n",
        "  assert Pow2(n) > 0 by {\n    var m := n;\n    if m == 0 { assert Pow2(m) == 1; } else { Pow2Positive(m); }\n  }\n",
        "  assert forall m: nat {:trigger Pow2(m)} :: m < n ==> Pow2(m) > 0 by {\n"
        "    forall m: nat | m < n ensures Pow2(m) > 0 { Pow2Positive(m); }\n  }\n",
    ],
)
def test_ghost_statements_a_proof_author_writes_are_accepted(inserted: str) -> None:
    action = COLLATZ_STAR.replace("  r := Pow2(n) + 1;\n", inserted + "  r := Pow2(n) + 1;\n")
    anns = extract_annotations(COLLATZ_STAR, action)
    assert anns and all(a.text for a in anns)
    assert "\n".join(a.text for a in anns).replace("\n", " ").split() == " ".join(inserted.split()).split()


def test_decreases_star_is_accepted_only_in_a_loop_of_a_program_that_declares_one() -> None:
    anns = extract_annotations(COLLATZ_STAR, COLLATZ_PROVED)
    assert [a.keyword for a in anns] == ["decreases", "assert"] and anns[0].text == "decreases *"
    without = COLLATZ_STAR.replace("  decreases *\n", "", 1)
    with pytest.raises(AnnotationError, match="decreases"):
        extract_annotations(without, COLLATZ_PROVED.replace("  decreases *\n{\n  var x", "{\n  var x", 1))
    on_method = COLLATZ_STAR.replace(
        "method Positive(n: nat) returns (r: nat)\n",
        "method Positive(n: nat) returns (r: nat)\n  decreases *\n",
    )
    with pytest.raises(AnnotationError, match="decreases"):
        extract_annotations(COLLATZ_STAR, on_method)


def test_lemma_calls_move_back_into_the_assert_by_the_hint_removal_split() -> None:
    """DafnyBench's hint removal kept the lemma call of an ``assert … by`` and dropped the rest:
    the ground truth puts the call back inside; the program's tokens all stay in order."""
    split = COLLATZ_STAR.replace("  r := Pow2(n) + 1;\n", "    Pow2Positive(n);\n  r := Pow2(n) + 1;\n")
    proved = COLLATZ_STAR.replace(
        "  r := Pow2(n) + 1;\n", "  assert Pow2(n) > 0 by {\n    Pow2Positive(n);\n  }\n  r := Pow2(n) + 1;\n"
    )
    (ann,) = extract_annotations(split, proved)
    assert (
        ann.absorbed == len(["Pow2Positive", "(", "n", ")", ";"]) and remove_annotation(proved, ann) == proved
    )


@pytest.mark.dafny
def test_the_accepted_shapes_verify_with_dafny_and_the_hint_free_program_does_not() -> None:
    import os

    from cm_gym.core.types import Action, AgentState
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator
    from cm_gym.evaluators.sandbox import ToolNotFoundError

    try:
        evaluator = DafnyEvaluator(cache=None)
    except ToolNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"dafny is missing in CI: {exc}")
        pytest.skip(str(exc))
    task = Task("dafny-shapes", "dafny", "p", "shapes", COLLATZ_PROVED, meta={"program": COLLATZ_STAR})
    proved = evaluator.check(AgentState(task), Action(COLLATZ_PROVED))
    assert proved.solved and proved.details["budget_kind"] == "boogie-rlimit", proved.feedback
    bare = evaluator.check(AgentState(task), Action(COLLATZ_STAR))
    assert not bare.solved and bare.status == "ok" and 0 < bare.score < 1
