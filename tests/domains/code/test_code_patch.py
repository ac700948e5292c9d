"""The code-repair action format: full programs and unified diffs, and their refusals."""

from __future__ import annotations

import pytest

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
