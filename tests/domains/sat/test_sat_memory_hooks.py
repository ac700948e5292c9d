"""SAT edit operators, contrast keys, apply_contrast, conditions and distil (the memory hooks)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.sat.domain import SatDomain
from cm_gym.domains.sat.edits import config_values
from cm_gym.domains.sat.encoding import compile_encoding
from cm_gym.domains.sat.generated import generate_encoding_tasks, make_encoding_task
from cm_gym.domains.sat.problems import family

DOMAIN = SatDomain()
TASKS = generate_encoding_tasks(0)


def first(pred: Callable[[Task], bool]) -> Task:
    return next(t for t in TASKS if pred(t))


def lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def holds(condition: str, task: Task) -> bool:
    return parse_condition(condition, DOMAIN.condition_predicates()).holds(task)


@pytest.mark.parametrize(
    "fam", ["coloring", "multicoloring", "pigeonhole", "queens", "partial_queens", "scheduling"]
)
def test_encoding_edits_change_exactly_one_line_and_still_parse(fam: str) -> None:
    task = first(lambda t: t.family == fam)
    edits = DOMAIN.edit_operators(task, task.reference)
    assert edits
    ref = lines(task.reference)
    sig = family(fam).signature(task.meta["problem"]["params"])
    for e in edits:
        new = lines(e.text)
        if len(new) == len(ref):
            assert sum(a != b for a, b in zip(ref, new, strict=True)) == 1, e
        elif len(new) == len(ref) - 1:
            assert all(ln in ref for ln in new), e
        else:
            assert len(new) == len(ref) + 1 and all(ln in new for ln in ref), e
        compile_encoding(e.text, sig)  # every edit is a valid encoding
    blind = dataclasses.replace(task, reference="")
    assert [e.text for e in DOMAIN.edit_operators(blind, task.reference)] == [e.text for e in edits]


def test_every_slip_is_undone_by_one_edit() -> None:
    model = DOMAIN.error_model()
    for op in model.operators:
        for t in [t for t in TASKS if op.probability(t) > 0][::7]:
            slipped = op.apply(t, t.reference, np.random.default_rng(0))
            if slipped is None or slipped == t.reference:
                continue
            fixes = {"\n".join(lines(e.text)) for e in DOMAIN.edit_operators(t, slipped)}
            assert "\n".join(lines(t.reference)) in fixes, (op.name, t.task_id)


def test_config_edits_change_one_key(tmp_path: object) -> None:
    task = dataclasses.replace(TASKS[0], features={"kind": "solver", "max_budget": 150})
    action = "solver: maplechrono\nphase: default\npreprocess: off\nbudget: 50"
    edits = DOMAIN.edit_operators(task, action)
    assert edits[0].text.endswith("budget: 150")  # the allowance is the first budget edit
    before = config_values(action)
    for e in edits:
        after = config_values(e.text)
        assert sum(before.get(k) != after.get(k) for k in set(before) | set(after)) == 1, e


def test_contrast_keys_are_canonical_and_invertible() -> None:
    a_minus = "at_least_one color[v][*] for v in V\nnot_both color[u][c] color[v][c] for (u, v) in E, c in C"
    a_plus = "exactly_one color[v][*] for v in V\nnot_both color[u][c] color[v][c] for (u, v) in E, c in C"
    key = DOMAIN.contrast_key(a_minus, a_plus)
    assert key == "sat head color: at_least_one -> exactly_one"
    assert DOMAIN.inverse_contrast_key(a_minus, a_plus) == "sat head color: exactly_one -> at_least_one"
    # whitespace and comments do not change the key
    assert DOMAIN.contrast_key(a_minus.replace(" for", "  for") + "\n# note", a_plus) == key
    low, high = "solver: maplecm\nbudget: 50", "solver: maplecm\nbudget: 150"
    assert DOMAIN.contrast_key(low, high) == "sat budget: raise"
    assert (
        DOMAIN.contrast_key("solver: maplecm\nbudget: 20", "solver: maplecm\nbudget: 90")
        == "sat budget: raise"
    )
    assert DOMAIN.inverse_contrast_key(low, high) == "sat budget: lower"


def test_apply_contrast_transfers_the_same_kind_of_edit() -> None:
    src = first(lambda t: t.family == "queens")
    a_minus = src.reference.replace("exactly_one q[r][*]", "at_most_one q[r][*]")
    # a full-queens draft of another size with the same slip gets the same fix
    other = first(lambda t: t.family == "queens" and t.features["board"] != src.features["board"])
    draft = other.reference.replace("exactly_one q[r][*]", "at_most_one q[r][*]")
    blind = dataclasses.replace(other, reference="")
    assert DOMAIN.apply_contrast(blind, draft, a_minus, src.reference) == other.reference
    # on a partial-queens look-alike the same pattern occurs, and the revision is harmful
    partial = first(lambda t: t.family == "partial_queens")
    revised = DOMAIN.apply_contrast(
        dataclasses.replace(partial, reference=""), partial.reference, a_minus, src.reference
    )
    assert revised is not None and "exactly_one q[r][*]" in revised
    # where the pattern does not occur, nothing is applied
    col = first(lambda t: t.family == "coloring")
    assert (
        DOMAIN.apply_contrast(dataclasses.replace(col, reference=""), col.reference, a_minus, src.reference)
        is None
    )


def test_apply_contrast_on_configurations() -> None:
    task = dataclasses.replace(TASKS[0], reference="", features={"kind": "solver", "max_budget": 12})
    a_minus, a_plus = "solver: maplechrono\nbudget: 150", "solver: maplecm\nbudget: 150"
    assert (
        DOMAIN.apply_contrast(task, "solver: maplechrono\nbudget: 12", a_minus, a_plus)
        == "solver: maplecm\nbudget: 12"
    )
    assert DOMAIN.apply_contrast(task, "solver: glucose4\nbudget: 12", a_minus, a_plus) is None
    raised = DOMAIN.apply_contrast(
        task, "solver: maplecm\nbudget: 10", "solver: maplecm\nbudget: 50", "solver: maplecm\nbudget: 150"
    )
    assert raised == "solver: maplecm\nbudget: 150"  # applied whether or not it fits this allowance


def test_distilled_conditions_hold_on_the_source_and_not_on_look_alikes() -> None:
    php_unsat = first(lambda t: t.family == "pigeonhole" and t.features["more_items_than_room"])
    php_sat = first(
        lambda t: (
            t.family == "pigeonhole"
            and not t.features["more_items_than_room"]
            and t.features["capacity"] == 1
        )
    )
    col = first(lambda t: t.family == "coloring")
    mcol = first(lambda t: t.family == "multicoloring")
    a_minus = php_unsat.reference.replace("exactly_one sit", "at_most_one sit")
    d = DOMAIN.distil(dataclasses.replace(php_unsat, reference=""), a_minus, php_unsat.reference)
    assert "pigeonhole" in d.situation and "head sit" in d.situation
    assert holds(d.condition, php_unsat) and not holds(d.condition, php_sat) and not holds(d.condition, col)
    d2 = DOMAIN.distil(col, col.reference.replace("exactly_one", "at_least_one"), col.reference)
    assert holds(d2.condition, col) and not holds(d2.condition, mcol)
    strict = first(lambda t: t.family == "scheduling" and t.features["strict"])
    loose = first(lambda t: t.family == "scheduling" and not t.features["strict"])
    d3 = DOMAIN.distil(strict, strict.reference.replace("s <= t", "s < t"), strict.reference)
    assert holds(d3.condition, strict) and not holds(d3.condition, loose)


def test_solver_conditions_separate_families_and_allowances() -> None:
    def solver_task(fam: str, budget: int, ratio: float) -> Task:
        return Task(
            f"s-{fam}",
            "sat",
            "p",
            f"satlib/{fam}",
            "",
            family=fam,
            features={
                "kind": "solver",
                "family": fam,
                "max_budget": budget,
                "clause_var_ratio": ratio,
                "n_vars": 50,
            },
        )

    uuf, uf20 = solver_task("uuf50-218", 150, 4.36), solver_task("uf20-91", 12, 4.55)
    d = DOMAIN.distil(uuf, "solver: maplecm\nbudget: 50", "solver: maplecm\nbudget: 150")
    assert holds(d.condition, uuf) and not holds(d.condition, uf20)
    assert "sat_budget_at_least(150)" in d.condition
    preds = DOMAIN.condition_predicates()
    assert preds["sat_clause_var_ratio_above"](uf20, ("4.5",)) and not preds["sat_clause_var_ratio_above"](
        uuf, ("4.5",)
    )
    assert preds["sat_kind_is"](uuf, ("solver",)) and not preds["sat_kind_is"](TASKS[0], ("solver",))
    assert all(fn.__doc__ for fn in preds.values())


def test_generated_task_helper_matches_generator() -> None:
    t = TASKS[0]
    again = make_encoding_task(t.task_id, t.family, t.meta["problem"]["params"])
    assert (again.prompt, again.reference, dict(again.features)) == (t.prompt, t.reference, dict(t.features))
