"""Code edit operators (one decision unit each, reference-blind), bug-class labels, the error
model, contrast keys and transfer of a record's fix to another draft."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.code.bugclass import bug_class_of
from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.code.edits import enumerate_mutations, mutations_between, normalise
from cm_gym.domains.code.generated import load_generated_tasks

BELOW = "def count_below(xs, t):\n    count = 0\n    for x in xs:\n        if x < t:\n            count += 1\n    return count\n"


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {f"{t.meta['template']}:{t.features['bug_class']}": t for t in load_generated_tasks()}


def test_each_edit_changes_exactly_one_unit(tasks: dict[str, Task]) -> None:
    domain = CodeDomain()
    task = tasks["binary_search:flipped_comparison"]
    edits = domain.edit_operators(task, task.meta["buggy"])
    assert 5 <= len(edits) <= 40
    for e in edits:
        assert e.text != task.meta["buggy"]
        assert mutations_between(task.meta["buggy"], e.text) is not None, e.description
        changed = [
            a for a, b in zip(task.meta["buggy"].splitlines(), e.text.splitlines(), strict=False) if a != b
        ]
        assert len(changed) <= 1 or "remove_base_case" in e.description


def test_edits_never_read_the_reference(tasks: dict[str, Task]) -> None:
    domain = CodeDomain()
    task = tasks["gcd:swapped_arguments"]
    blind = dataclasses.replace(task, reference="")
    assert [e.text for e in domain.edit_operators(task, task.meta["buggy"])] == [
        e.text for e in domain.edit_operators(blind, task.meta["buggy"])
    ]


def test_some_edit_repairs_a_single_edit_bug(tasks: dict[str, Task]) -> None:
    domain = CodeDomain()
    for key in ("count_below:flipped_comparison", "triangle_number:off_by_one", "gcd:swapped_arguments"):
        task = tasks[key]
        texts = {normalise(e.text) for e in domain.edit_operators(task, task.meta["buggy"])}
        assert normalise(task.reference) in texts, key


def test_edits_of_a_diff_action_apply_it_to_the_buggy_program(tasks: dict[str, Task]) -> None:
    task = tasks["count_below:flipped_comparison"]
    diff = "@@ -4 +4 @@\n-        if x <= t:\n+        if x < t:\n"
    edits = CodeDomain().edit_operators(task, diff)
    assert edits and all("def count_below" in e.text for e in edits)
    assert CodeDomain().edit_operators(task, "def broken(:\n") == []


def test_mutation_kinds_cover_the_issue_list() -> None:
    kinds = {
        m.kind
        for m in enumerate_mutations(
            BELOW + "def f(a, b):\n    if a == 0:\n        return b\n    return f(b, a % b)\n"
        )
    }
    assert {"flip_comparison", "plus_one", "minus_one", "swap_arguments", "change_variable", "remove_base_case",
            "add_base_case", "change_operator"} <= kinds  # fmt: skip


@pytest.mark.parametrize(
    ("buggy", "fixed", "cls"),
    [
        ("if x <= t:\n    pass\n", "if x < t:\n    pass\n", "flipped_comparison"),
        ("y = range(n)\n", "y = range(n + 1)\n", "off_by_one"),
        ("y = f(b, a)\n", "y = f(a, b)\n", "swapped_arguments"),
        ("n ^= n - 1\n", "n &= n - 1\n", "wrong_operator"),
        ("def g(a, b):\n    return b\n", "def g(a, b):\n    return a\n", "wrong_variable"),
    ],
)
def test_bug_class_is_read_from_the_fix(buggy: str, fixed: str, cls: str) -> None:
    assert bug_class_of(buggy, fixed) == cls


def test_error_model_drafts_are_plausible_programs(tasks: dict[str, Task]) -> None:
    model = CodeDomain().error_model()
    task = tasks["count_below:flipped_comparison"]
    names = [op.name for op in model.operators]
    assert names[0] == "leave_bug_unfixed" and "flip_boundary" in names
    leave = model.operators[0]
    assert (
        0 < leave.probability(task) <= 1
        and leave.apply(task, task.reference, np.random.default_rng(0)) == task.meta["buggy"]
    )
    flip = next(op for op in model.operators if op.name == "flip_boundary")
    assert flip.probability(task) > flip.probability(tasks["histogram:wrong_operator"])
    slipped = flip.apply(task, task.reference, np.random.default_rng(1))
    assert (
        slipped is not None
        and slipped != task.reference
        and mutations_between(task.reference, slipped) is not None
    )
    assert next(op for op in model.operators if op.name == "drop_base_case").probability(task) == 0.0


def test_contrast_keys_are_inverse_of_each_other() -> None:
    domain = CodeDomain()
    fixed = BELOW
    buggy = BELOW.replace("x < t", "x <= t")
    key = domain.contrast_key(buggy, fixed)
    assert key == "flip_comparison: <= -> <"
    assert domain.inverse_contrast_key(buggy, fixed) == "flip_comparison: < -> <="


def test_apply_contrast_moves_the_same_kind_of_edit(tasks: dict[str, Task]) -> None:
    domain = CodeDomain()
    src = tasks["count_below:flipped_comparison"]
    a_minus, a_plus = src.meta["buggy"], src.reference
    other = tasks["count_longer_than:flipped_comparison"]
    blind = dataclasses.replace(other, reference="")
    revised = domain.apply_contrast(blind, other.meta["buggy"], a_minus, a_plus)
    assert revised is not None and normalise(revised) == normalise(other.reference)
    # a draft without a `<=` has no site for this record
    assert domain.apply_contrast(blind, "def f(x):\n    return x\n", a_minus, a_plus) is None
