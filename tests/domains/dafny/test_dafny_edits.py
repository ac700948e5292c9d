"""Dafny edit operators, error model, record transfer, conditions and contrast keys (no verifier)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.dafny.annotations import extract_annotations, norm
from cm_gym.domains.dafny.domain import DafnyDomain
from tests.domains.dafny.conftest import by_file

pytestmark = pytest.mark.data


def holds(text: str, task: Task) -> bool:
    return parse_condition(text, DafnyDomain().condition_predicates()).holds(task)


def test_each_edit_changes_one_annotation(dafny_tasks: list[Task]) -> None:
    task = by_file(dafny_tasks, "CS494-final-project_tmp_tmp7nof55uq_bubblesort")
    before = Counter(norm(a.text) for a in extract_annotations(task.meta["program"], task.reference))
    edits = DafnyDomain().edit_operators(task, task.reference)
    assert len(edits) >= 8
    for e in edits:
        after = Counter(norm(a.text) for a in extract_annotations(task.meta["program"], e.text))
        changed = sum(((before - after) + (after - before)).values())
        assert changed in (1, 2), e.description  # one dropped, added, or replaced
    hr_edits = DafnyDomain().edit_operators(task, task.meta["program"])
    assert any("add `invariant" in e.description for e in hr_edits)
    assert DafnyDomain().edit_operators(task, "method Broken(") == []


def test_edits_are_reference_blind(dafny_tasks: list[Task]) -> None:
    task = by_file(dafny_tasks, "Clover_array_append")
    blind = dataclasses.replace(task, reference="")
    d = DafnyDomain()
    assert [e.text for e in d.edit_operators(task, task.meta["program"])] == [
        e.text for e in d.edit_operators(blind, task.meta["program"])
    ]


def test_error_model_drops_and_perturbs_hints(dafny_tasks: list[Task]) -> None:
    task = by_file(dafny_tasks, "CS494-final-project_tmp_tmp7nof55uq_bubblesort")
    ops = {op.name: op for op in DafnyDomain().error_model().operators}
    assert {"no_hints", "drop_invariant", "drop_assertion", "drop_decreases", "off_by_one_invariant"} <= set(
        ops
    )
    rng = np.random.default_rng(0)
    n = len(extract_annotations(task.meta["program"], task.reference))
    dropped = ops["drop_invariant"].apply(task, task.reference, rng)
    assert dropped is not None and len(extract_annotations(task.meta["program"], dropped)) == n - 1
    shifted = ops["off_by_one_invariant"].apply(task, task.reference, rng)
    assert shifted is not None and shifted != task.reference
    assert len(extract_annotations(task.meta["program"], shifted)) == n
    assert ops["no_hints"].apply(task, task.reference, rng) == task.meta["program"]
    assert ops["drop_decreases"].apply(task, task.reference, rng) is None  # it has no decreases clause
    straight = by_file(dafny_tasks, "Clover_abs")
    assert ops["drop_invariant"].probability(straight) == 0.0 < ops["drop_invariant"].probability(task)


def test_transfer_renames_to_a_loop_with_the_same_guard_shape(dafny_tasks: list[Task]) -> None:
    src = by_file(dafny_tasks, "Clover_array_append")
    dst = by_file(dafny_tasks, "Clover_remove_front")
    a_plus = src.reference
    a_minus = a_plus.replace("    invariant 0 <= i <= a.Length\n", "")
    blind = dataclasses.replace(dst, reference="")
    revised = DafnyDomain().apply_contrast(blind, dst.meta["program"], a_minus, a_plus)
    assert revised is not None
    assert [a.text for a in extract_annotations(dst.meta["program"], revised)] == [
        "invariant 0 <= i <= a.Length"
    ]
    # no loop of that shape → nothing to transfer
    assert (
        DafnyDomain().apply_contrast(
            blind, by_file(dafny_tasks, "Clover_abs").meta["program"], a_minus, a_plus
        )
        is None
    )


def test_distilled_condition_names_the_guard_shape(dafny_tasks: list[Task]) -> None:
    src = by_file(dafny_tasks, "Clover_array_append")
    a_minus = src.reference.replace("    invariant 0 <= i <= a.Length\n", "")
    d = DafnyDomain().distil(src, a_minus, src.reference)
    assert "invariant 0 <= i <= a.Length" in d.situation
    assert 'dafny_loop_guard_shape_is("V < V . Length")' in d.condition
    assert holds(d.condition, src) and holds(d.condition, by_file(dafny_tasks, "Clover_remove_front"))
    assert not holds(d.condition, by_file(dafny_tasks, "Clover_cal_sum"))  # a `!=` loop
    assert not holds(d.condition, by_file(dafny_tasks, "Clover_abs"))  # no loop


def test_predicates(dafny_tasks: list[Task]) -> None:
    bubble = by_file(dafny_tasks, "CS494-final-project_tmp_tmp7nof55uq_bubblesort")
    abs_ = by_file(dafny_tasks, "Clover_abs")
    assert holds("dafny_has_loop()", bubble) and not holds("dafny_has_loop()", abs_)
    assert holds("dafny_uses_arrays() AND dafny_uses_multiset()", bubble)
    assert holds('dafny_method_name_mentions("bubble")', bubble) and not holds(
        'dafny_method_name_mentions("bubble")', abs_
    )
    assert holds('dafny_loops_at_least("2")', bubble) and not holds('dafny_loops_at_least("3")', bubble)
    assert holds('dafny_member_kind_is("predicate")', bubble) and not holds(
        'dafny_member_kind_is("lemma")', bubble
    )
    assert not holds("dafny_has_loop()", dataclasses.replace(bubble, domain="code"))


def test_contrast_keys_invert() -> None:
    d = DafnyDomain()
    a = "while i < n\n{\n}\n"
    b = "while i < n\n  invariant i <= n\n{\n}\n"
    assert d.contrast_key(a, b) == "+invariant i <= n"
    assert d.inverse_contrast_key(a, b) == "-invariant i <= n"
    assert d.decision_units(b) == ["invariant i <= n"]
