"""Dafny's recurring slip families (no verifier): each is tied to a program feature, its repair is
among the reference-blind edits, and a correction learnt on one program transfers to a program of
the same loop shape but not to a look-alike of another shape."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.dafny.annotations import extract_annotations
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.dafny.program import loops
from cm_gym.domains.dafny.slips import (
    drop_slice_invariant,
    hard_termination,
    slice_invariants,
    slice_spec,
    spec_decreases,
    strict_index_loop,
    weak_bound,
)
from tests.domains.dafny.conftest import by_file

pytestmark = pytest.mark.data


def anns(task: Task, action: str) -> Counter[str]:
    return Counter(
        "".join(a.text.split()).rstrip(";") for a in extract_annotations(task.meta["program"], action)
    )


def test_weak_bound_writes_the_bound_like_the_guard_and_its_repair_comes_first(
    dafny_tasks: list[Task],
) -> None:
    task = by_file(dafny_tasks, "Clover_array_append")
    assert strict_index_loop(task)
    draft = weak_bound(task, task.reference, np.random.default_rng(0))
    assert draft is not None and "invariant 0 <= i < a.Length" in draft
    first = DafnyDomain().edit_operators(dataclasses.replace(task, reference=""), draft)[0]
    assert anns(task, first.text) == anns(task, task.reference)
    # a program without a strict index loop never makes this slip
    abs_ = by_file(dafny_tasks, "Clover_abs")
    assert not strict_index_loop(abs_) and weak_bound(abs_, abs_.reference, np.random.default_rng(0)) is None


def test_slice_invariants_come_from_the_postcondition(dafny_tasks: list[Task]) -> None:
    task = by_file(dafny_tasks, "Clover_bubble_sort")
    assert slice_spec(task) and not slice_spec(by_file(dafny_tasks, "Clover_abs"))
    proposed = {c for lp in loops(task.meta["program"]) for c in slice_invariants(task.meta["program"], lp)}
    assert "invariant multiset(a[..])==multiset(old(a[..]))" in {
        "invariant " + "".join(c.split()[1:]) for c in proposed
    }
    draft = drop_slice_invariant(task, task.reference, np.random.default_rng(1))
    before, after = anns(task, task.reference), anns(task, draft)
    assert (
        draft is not None and before is not None and after is not None and sum((before - after).values()) == 1
    )
    edits = DafnyDomain().edit_operators(task, draft)
    assert any(anns(task, e.text) == anns(task, task.reference) for e in edits)


def test_slip_rates_follow_program_features(dafny_tasks: list[Task]) -> None:
    ops = {op.name: op for op in DafnyDomain().error_model().operators}
    assert {"weak_bound", "drop_slice_invariant", "drop_decreases"} <= set(ops)
    rec = next(t for t in dafny_tasks if t.features["has_recursion"] and not t.features["has_loop"])
    index_only = by_file(dafny_tasks, "Clover_array_append")
    assert hard_termination(rec) and not hard_termination(index_only)
    assert ops["drop_decreases"].probability(rec) > ops["drop_decreases"].probability(index_only) > 0
    assert ops["weak_bound"].probability(rec) == 0 < ops["weak_bound"].probability(index_only)
    # over the whole benchmark, each family's repair is among the edits of most drafts it spoils
    repaired, fired = Counter[str](), Counter[str]()
    for t in dafny_tasks[::5]:
        for name in ("weak_bound", "drop_slice_invariant", "drop_decreases"):
            out = (
                ops[name].apply(t, t.reference, np.random.default_rng(0))
                if ops[name].probability(t)
                else None
            )
            if out is None:
                continue
            fired[name] += 1
            repaired[name] += any(
                anns(t, e.text) == anns(t, t.reference) for e in DafnyDomain().edit_operators(t, out)
            )
    assert fired["weak_bound"] >= 15 and repaired["weak_bound"] == fired["weak_bound"]
    assert fired["drop_decreases"] >= 15 and repaired["drop_decreases"] >= fired["drop_decreases"] // 4


def test_a_bound_correction_transfers_by_loop_shape_and_its_condition_excludes_a_look_alike(
    dafny_tasks: list[Task],
) -> None:
    d = DafnyDomain()
    src, dst = by_file(dafny_tasks, "Clover_array_append"), by_file(dafny_tasks, "Clover_replace")
    a_minus = weak_bound(src, src.reference, np.random.default_rng(0))
    assert a_minus is not None
    draft = weak_bound(dst, dst.reference, np.random.default_rng(0))
    assert draft is not None
    revised = d.apply_contrast(dataclasses.replace(dst, reference=""), draft, a_minus, src.reference)
    assert revised is not None and anns(dst, revised) == anns(dst, dst.reference)  # renamed a -> arr
    cond = parse_condition(d.distil(src, a_minus, src.reference).condition, d.condition_predicates())
    assert cond.holds(dst)
    # look-alike: a loop program with a bound invariant, but its loop runs to ``i <= n``
    look = next(
        t
        for t in dafny_tasks
        if "V <= V" in t.features["loop_guard_shapes"] and len(t.features["loop_guard_shapes"]) == 1
    )
    assert not cond.holds(look)


def test_a_recursive_members_measure_is_proposed_and_conditions_hold_on_their_source(
    dafny_tasks: list[Task],
) -> None:
    d = DafnyDomain()
    program = (
        "function F(n: nat, s: seq<int>): int\n  requires n >= 0\n{\n  if n == 0 then 0 else F(n - 1, s)\n}\n"
    )
    assert spec_decreases(program) == [(0, "decreases n"), (0, "decreases |s|")]
    assert spec_decreases(program.replace("  requires n >= 0\n", "  decreases n\n")) == []
    # Clover_match loops over a string: `|s|` in its bound invariant is no sequence feature, so the
    # distilled condition must not claim one (it would be false on its own source)
    src = by_file(dafny_tasks, "Clover_match")
    a_minus = weak_bound(src, src.reference, np.random.default_rng(0))
    assert a_minus is not None
    cond = d.distil(src, a_minus, src.reference).condition
    assert parse_condition(cond, d.condition_predicates()).holds(src), cond
    # the contrast key counts lines: a clause added to a second member is a change
    with_f = program.replace("  requires n >= 0\n", "  decreases n\n")
    both = with_f + "function G(n: nat): int\n  decreases n\n{\n  if n == 0 then 0 else G(n - 1)\n}\n"
    one = with_f + "function G(n: nat): int\n{\n  if n == 0 then 0 else G(n - 1)\n}\n"
    assert d.contrast_key(one, both) == "+decreases n"
