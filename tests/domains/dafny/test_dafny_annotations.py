"""The Dafny action format: the task's program plus annotation lines, and what is refused."""

from __future__ import annotations

import pytest

from cm_gym.domains.dafny.annotations import (
    AnnotationError,
    extract_annotations,
    insert_after,
    remove_annotation,
    replace_annotation,
)
from cm_gym.domains.dafny.hostile import SUM
from cm_gym.types import Task

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
    """Nearly every DafnyBench ground truth is its program plus allowed annotations; the rest use
    forms the action format refuses (``assert ... by {}``, attributes, ``decreases *``) or
    lost program text in upstream's hint removal."""
    assert len(dafny_tasks) == 445
    counts = {"invariant": 0, "assert": 0, "decreases": 0}
    refused: list[str] = []
    for t in dafny_tasks:
        try:
            anns = extract_annotations(t.meta["program"], t.reference)
        except AnnotationError as exc:
            refused.append(str(exc))
            continue
        assert (not anns) == t.meta["hints_identical"] or not anns, t.meta["file"]
        for a in anns:
            counts[a.keyword] += 1
        stripped = t.reference
        for a in sorted(anns, key=lambda a: -(a.span or (0, 0))[0]):
            stripped = remove_annotation(stripped, a)
        assert extract_annotations(t.meta["program"], stripped) == [], t.meta["file"]
    assert len(refused) <= 25
    allowed = (
        "'by'",
        "'{:'",
        "'decreases *'",
        "may not be changed",
        "never closes",
        "loop header or specification",
    )
    assert all(any(a in why for a in allowed) for why in refused), refused
    assert min(counts.values()) > 100
