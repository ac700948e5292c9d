"""SMT edit operators, contrast keys, apply_contrast, conditions and distil."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.smt.domain import SmtDomain
from cm_gym.domains.smt.edits import config_values
from cm_gym.domains.smt.generated import generate_smt_tasks
from cm_gym.domains.smt.sandbox import vet_script

DOMAIN = SmtDomain()
TASKS = generate_smt_tasks(0)


def first(pred: Callable[[Task], bool]) -> Task:
    return next(t for t in TASKS if pred(t))


def lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def holds(condition: str, task: Task) -> bool:
    return parse_condition(condition, DOMAIN.condition_predicates()).holds(task)


@pytest.mark.parametrize("fam", ["bounds", "integrality", "meetings", "digits", "bitvector"])
def test_script_edits_change_one_line_and_stay_in_the_sandbox(fam: str) -> None:
    task = first(lambda t: t.family == fam)
    edits = DOMAIN.edit_operators(task, task.reference)
    assert edits
    ref = lines(task.reference)
    for e in edits:
        new = lines(e.text)
        if len(new) == len(ref):
            assert sum(a != b for a, b in zip(ref, new, strict=True)) == 1, e
        elif len(new) == len(ref) - 1:
            assert all(ln in ref for ln in new), e
        else:
            assert len(new) == len(ref) + 1 and all(ln in new for ln in ref), e
        vet_script(e.text)
    blind = dataclasses.replace(task, reference="")
    assert [e.text for e in DOMAIN.edit_operators(blind, task.reference)] == [e.text for e in edits]


def test_every_slip_is_undone_by_one_edit() -> None:
    for op in DOMAIN.error_model().operators:
        for t in [t for t in TASKS if op.probability(t) > 0][::9]:
            slipped = op.apply(t, t.reference, np.random.default_rng(2))
            if slipped is None or slipped == t.reference:
                continue
            fixes = {"\n".join(lines(e.text)) for e in DOMAIN.edit_operators(t, slipped)}
            if op.name == "missing_distinct":  # the re-added line lists the declared Int constants
                assert any("(distinct" in f for f in fixes), t.task_id
            else:
                assert "\n".join(lines(t.reference)) in fixes, (op.name, t.task_id)


def test_edits_include_the_issue_operators() -> None:
    descs = {e.description for t in TASKS[::10] for e in DOMAIN.edit_operators(t, t.reference)}
    for wanted in (
        ">= -> >",
        "> -> >=",
        "sort Int -> Real",
        "sort Real -> Int",
        "width 8 -> 16",
        "add distinct",
        "bvslt -> bvult",
    ):
        assert any(wanted in d for d in descs), wanted
    assert any(d.startswith("drop (assert (distinct") for d in descs)


def test_config_edits_change_one_key() -> None:
    task = dataclasses.replace(
        TASKS[0], features={"kind": "solver", "logic": "QF_BV", "max_rlimit": 2_000_000}
    )
    action = "logic: QF_LRA\ntactic: default\nrlimit: 40000"
    edits = DOMAIN.edit_operators(task, action)
    assert edits[0].text.endswith("rlimit: 2000000")
    assert any(e.text.startswith("logic: QF_BV") for e in edits)
    before = config_values(action)
    for e in edits:
        after = config_values(e.text)
        assert sum(before.get(k) != after.get(k) for k in set(before) | set(after)) == 1, e


def test_contrast_keys() -> None:
    t = first(lambda t: t.family == "bounds" and "(>= " in t.reference)
    a_minus = t.reference.replace("(>= ", "(> ", 1)
    assert DOMAIN.contrast_key(a_minus, t.reference) == "smt cmp > -> >="
    assert DOMAIN.inverse_contrast_key(a_minus, t.reference) == "smt cmp >= -> >"
    m = first(lambda t: t.family == "meetings" and t.features["has_distinct"])
    no_distinct = "\n".join(ln for ln in m.reference.splitlines() if "distinct" not in ln)
    assert DOMAIN.contrast_key(no_distinct, m.reference) == "smt add distinct"
    assert (
        DOMAIN.contrast_key("logic: QF_LIA\nrlimit: 10", "logic: QF_LIA\nrlimit: 900") == "smt rlimit: raise"
    )


def test_apply_contrast_transfers_and_harms_look_alikes() -> None:
    m = first(lambda t: t.family == "meetings" and t.features["has_distinct"] and t.meta["expected"] == "sat")
    no_distinct = "\n".join(ln for ln in m.reference.splitlines() if "distinct" not in ln)
    parallel = first(lambda t: t.family == "meetings" and not t.features["has_distinct"])
    revised = DOMAIN.apply_contrast(
        dataclasses.replace(parallel, reference=""), parallel.reference, no_distinct, m.reference
    )
    assert revised is not None and "(assert (distinct" in revised
    from cm_gym.core.types import Action, AgentState
    from cm_gym.domains.smt.evaluator import SmtEvaluator

    o = SmtEvaluator().check(AgentState(parallel), Action(revised))
    assert not o.solved  # meetings that may share an hour become infeasible: a harmful reuse
    bv = first(lambda t: t.family == "bitvector")
    assert (
        DOMAIN.apply_contrast(dataclasses.replace(bv, reference=""), bv.reference, no_distinct, m.reference)
        is None
    )
    # strictness: same kind of edit on another bounds task's first matching comparison
    b1 = first(lambda t: t.family == "bounds" and "(> " in t.reference)
    b2 = next(t for t in TASKS if t.family == "bounds" and "(> " in t.reference and t is not b1)
    draft = DOMAIN.apply_contrast(
        dataclasses.replace(b2, reference=""),
        b2.reference,
        b1.reference,
        b1.reference.replace("(> ", "(>= ", 1),
    )
    assert draft is not None and draft.count("(>= ") == b2.reference.count("(>= ") + 1


def test_distilled_conditions_separate_look_alikes() -> None:
    whole = first(lambda t: t.family == "integrality" and t.features["whole_numbers"])
    real = first(lambda t: t.family == "integrality" and t.features["real_numbers"])
    d = DOMAIN.distil(
        real, real.reference.replace("(declare-const x Real)", "(declare-const x Int)"), real.reference
    )
    assert holds(d.condition, real) and not holds(d.condition, whole)
    assert "sort Int -> Real" in d.situation
    m = first(lambda t: t.family == "meetings" and t.features["has_distinct"])
    par = first(lambda t: t.family == "meetings" and not t.features["has_distinct"])
    d2 = DOMAIN.distil(
        m, "\n".join(ln for ln in m.reference.splitlines() if "distinct" not in ln), m.reference
    )
    assert holds(d2.condition, m) and not holds(d2.condition, par)
    incl = first(lambda t: t.family == "bounds" and "at least" in t.prompt and "(>= " in t.reference)
    strict_only = first(
        lambda t: (
            t.family == "bounds"
            and not any(w in t.prompt for w in ("at least", "no less than", "at most", "no more than"))
        )
    )
    d3 = DOMAIN.distil(incl, incl.reference.replace("(>= ", "(> ", 1), incl.reference)
    assert (
        "mentions_any" in d3.condition and holds(d3.condition, incl) and not holds(d3.condition, strict_only)
    )


def test_solver_conditions() -> None:
    def solver_task(logic: str, nonlinear: bool) -> Task:
        return Task(
            f"s-{logic}",
            "smt",
            "p",
            f"smtlib/{logic}",
            "",
            family=logic,
            features={
                "kind": "solver",
                "logic": logic,
                "has_nonlinear": nonlinear,
                "max_rlimit": 2_000_000,
                "uses_bitvectors": logic == "QF_BV",
            },
        )

    bv, lia = solver_task("QF_BV", False), solver_task("QF_LIA", False)
    d = DOMAIN.distil(bv, "logic: QF_LRA\nrlimit: 2000000", "logic: QF_BV\nrlimit: 2000000")
    assert holds(d.condition, bv) and not holds(d.condition, lia)
    preds = DOMAIN.condition_predicates()
    assert preds["smt_uses_bitvectors"](bv, ("true",)) and not preds["smt_uses_bitvectors"](lia, ("true",))
    assert preds["smt_has_nonlinear"](lia, ("false",)) and preds["smt_logic_is"](lia, ("QF_LIA", "QF_LRA"))
    assert all(fn.__doc__ for fn in preds.values())
