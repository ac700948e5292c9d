"""The code-repair action format: full programs and unified diffs, and their refusals."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.domains.code.patch import PatchError, apply_patch, looks_like_diff

BUGGY = "def count_below(xs, t):\n    count = 0\n    for x in xs:\n        if x <= t:\n            count += 1\n    return count\n"
FIXED = BUGGY.replace("x <= t", "x < t")

DIFF = """--- a/solution.py
+++ b/solution.py
@@ -3,3 +3,3 @@
     for x in xs:
-        if x <= t:
+        if x < t:
             count += 1
"""


def test_full_program_is_taken_as_is() -> None:
    assert apply_patch(BUGGY, FIXED, "count_below") == FIXED


def test_unified_diff_is_applied_to_the_buggy_program() -> None:
    assert looks_like_diff(DIFF) and not looks_like_diff(FIXED)
    assert apply_patch(BUGGY, DIFF, "count_below") == FIXED


def test_diff_line_numbers_are_only_hints() -> None:
    shifted = DIFF.replace("@@ -3,3 +3,3 @@", "@@ -40,3 +40,3 @@")
    headerless = "\n".join(DIFF.splitlines()[2:]) + "\n"
    assert apply_patch(BUGGY, shifted) == FIXED
    assert apply_patch(BUGGY, headerless) == FIXED


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("def count_below(xs, t)\n    return 0\n", "not valid Python"),
        ("def other(x):\n    return x\n", "does not define"),
        (DIFF.replace("-        if x <= t:", "-        if x >= t:"), "does not apply"),
        ("@@ -1 +1 @@\n?garbage\n", "malformed diff line"),
        ("x = 1\n" * 20_000, "too long"),
    ],
)
def test_malformed_patches_are_refused_with_a_reason(action: str, why: str) -> None:
    with pytest.raises(PatchError, match=why):
        apply_patch(BUGGY, action, "count_below")


# -- fuzzing (issue 14): any action text is a program, a PatchError, never another exception -----

_ORIGINAL = "def add(a, b):\n    x = a\n    return x + b\n"
_LINES = ["@@ -1,2 +1,2 @@", "@@ -9 +9 @@", "--- a/x.py", "+++ b/x.py", " def add(a, b):", "-    x = a",
          "+    x = a + 0", "     return x + b", "+", "-", " ", "\\ No newline", "def add(a, b):", "    return -" * 3,
          "(" * 50, "-" * 3000 + "a"]  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_LINES), max_size=12).map("\n".join))
def test_any_action_text_is_a_program_or_a_patch_error(text: str) -> None:
    try:
        program = apply_patch(_ORIGINAL, text, "add")
    except PatchError as exc:
        assert str(exc)
        return
    compile(program, "<patched>", "exec")  # what passes is valid Python that defines add
    assert "def add(" in program
