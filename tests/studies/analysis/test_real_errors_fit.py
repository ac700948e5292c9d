"""The fitted profiles against the real mistakes they were fitted to (the actual fit check, on
seeds the fit did not use), and the Dafny / HumanEval classifiers on hand-written pairs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.studies.analysis.real_errors_compare import compare
from cm_gym.studies.analysis.real_errors_dafny import classify_dafny
from cm_gym.studies.analysis.real_errors_humaneval import classify_python

PROGRAM = """method Sum(n: nat) returns (s: nat)
  ensures s == n * (n + 1) / 2
{
  var i := 0;
  s := 0;
  while i < n
  {
    i := i + 1;
    s := s + i;
  }
}
"""
TRUTH = PROGRAM.replace(
    "  {\n    i := i + 1;",
    "    invariant 0 <= i <= n\n    invariant s == i * (i + 1) / 2\n  {\n    i := i + 1;",
)


@pytest.mark.parametrize(
    "answer,kinds,local",
    [
        (PROGRAM, ("no_annotations",), False),
        (TRUTH.replace("0 <= i <= n", "0 <= i < n"), ("bound",), True),
        (TRUTH.replace("    invariant s == i * (i + 1) / 2\n", ""), ("missing_invariant",), True),
        (
            TRUTH.replace("  {\n    i := i", "    invariant i < n\n  {\n    i := i"),
            ("extra_invariant",),
            True,
        ),
        (TRUTH.replace("  {\n    i := i", "    decreases i\n  {\n    i := i"), ("extra_decreases",), True),
        (TRUTH.replace("s := s + i;", "s := s + i + 0;"), ("changed_code",), False),
        (TRUTH.replace("ensures s == n * (n + 1) / 2", "ensures s >= 0"), ("changed_spec",), False),
        (TRUTH.replace("    i := i + 1;", "    assume false;\n    i := i + 1;"), ("forbidden",), False),
        ("I apologize, but this cannot be verified.", ("no_program",), False),
        (TRUTH, ("same_as_truth",), False),
    ],
)
def test_dafny_kinds_on_hand_written_answers(answer: str, kinds: tuple, local: bool) -> None:
    assert classify_dafny(answer, PROGRAM, TRUTH) == (kinds, local)


REF = "def f(xs):\n    total = 0\n    for x in xs:\n        if x > 0:\n            total += x\n    return total\n"


@pytest.mark.parametrize(
    "program,kind,local",
    [
        (REF.replace("x > 0", "x >= 0"), "boundary", True),
        (REF.replace("total += x", "total -= x"), "operator", True),
        (REF.replace("total = 0", "total = 1"), "value", True),
        ("def f(xs):\n    return sum(x for x in xs if x > 0) * 2\n", "other", False),
        ("def f(xs):\n    '''doc'''\n", "no_program", False),
        ("def f(xs:\n", "does_not_run", False),
        ("def g(xs):\n    return 0\n", "does_not_run", False),
    ],
)
def test_python_classes_on_hand_written_programs(program: str, kind: str, local: bool) -> None:
    assert classify_python(program, REF, "f") == (kind, local)


@pytest.mark.data
@pytest.mark.parametrize("kind,system,limit", [("spider", "gpt-4-zero-shot", 250), ("dafny", "gpt-4o", None)])
def test_fitted_profile_lands_closer_to_the_real_mistakes(
    shared_data: Path, kind: str, system: str, limit: int | None
) -> None:
    result = compare(kind, system, [None, system], seeds=(1,), repair=False, limit=limit)
    before, after = result["distance"]["default"], result["distance"][system]
    assert after.tv < before.tv - 0.15, (before, after)  # much closer kind distribution
    assert abs(after.none_gap) < 8.0  # and the real difficulty, within a few points
    kinds = set(result["simulated"][system].mass()) - {"no_structural_diff"}
    real = {k for k, v in result["real"].mass().items() if v > 0}
    assert len(real & {k for k, v in result["simulated"][system].mass().items() if v > 0}) >= len(real) - 3
    assert kinds
