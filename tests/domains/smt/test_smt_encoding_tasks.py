"""Generated SMT encoding tasks: references solve, the independent checker, slips lower U,
the unsat verdict, determinism."""

from __future__ import annotations

import collections
from fractions import Fraction

import numpy as np
import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.smt.domain import SmtDomain
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.generated import generate_smt_tasks
from cm_gym.domains.smt.problems import Problem, check_model, evaluate, parse_term

TASKS = generate_smt_tasks(0)
EV = SmtEvaluator()
FAMILIES = ("bounds", "integrality", "meetings", "digits", "bitvector")


def check(task: Task, text: str) -> Outcome:
    return EV.check(AgentState(task), Action(text))


def fam(name: str) -> list[Task]:
    return [t for t in TASKS if t.family == name]


def test_generation_is_deterministic_sized_with_look_alikes() -> None:
    assert len(TASKS) >= 300 and len({t.task_id for t in TASKS}) == len(TASKS)
    assert [t.reference for t in generate_smt_tasks(0)] == [t.reference for t in TASKS]
    assert [t.prompt for t in generate_smt_tasks(3)] != [t.prompt for t in TASKS]
    assert {t.family for t in TASKS} == set(FAMILIES)
    assert {t.features["whole_numbers"] for t in fam("integrality")} == {True, False}
    assert {t.features["has_distinct"] for t in fam("meetings")} == {True, False}
    assert {t.features["bit_width"] for t in fam("bitvector")} == {8, 16}
    assert {t.meta["expected"] for t in TASKS} == {"sat", "unsat"}
    assert max(len(t.reference) for t in TASKS) < 2000  # fits the prompt's action field
    assert all("expected" not in t.features for t in TASKS)


@pytest.mark.parametrize("family", FAMILIES)
def test_references_solve(family: str) -> None:
    for t in fam(family)[::5]:
        o = check(t, t.reference)
        assert o.solved and o.details["verdict"] == t.meta["expected"], (t.task_id, o.feedback)


@pytest.mark.slow
def test_every_reference_solves() -> None:
    assert [t.task_id for t in TASKS if not check(t, t.reference).solved] == []


def test_python_checker_semantics() -> None:
    env = {"x": (200, 8), "y": (100, 8), "n": Fraction(7, 2)}
    assert evaluate(parse_term("(bv2nat (bvadd x y))"), env) == Fraction(44)
    assert evaluate(parse_term("(bvslt x y)"), env) is True  # 200 is -56 as a signed byte
    assert evaluate(parse_term("(bvult x y)"), env) is False
    assert evaluate(parse_term("(>= (* 2 n) 7)"), env) is True
    assert evaluate(parse_term("(distinct 1 2 1)"), env) is False
    p = Problem(
        "t",
        (("x", "Int"), ("w", "BV8")),
        (("(> x 1)", "x > 1"), ("(= (bv2nat w) 5)", "w is 5")),
        "sat",
        "QF_BV",
    )
    assert all(ok for _, ok in check_model(p, {"x": 2, "w": 5}))
    bad = dict(check_model(p, {"x": Fraction(5, 2), "w": 261}))
    assert not bad["x = 5/2 must be a whole number"] and not bad["w = 261 must fit in 8 bits"]
    assert bad["w is 5"] and bad["x > 1"]  # 261 wraps to 5: only the range check catches it


def test_slips_lower_u() -> None:
    model = {op.name: op for op in SmtDomain().error_model().operators}
    cases = {
        "strict_for_inclusive": fam("bounds"),
        "inclusive_for_strict": fam("bounds"),
        "real_for_int": fam("integrality"),
        "int_for_real": fam("integrality"),
        "missing_distinct": fam("meetings"),
        "bit_width_overflow": fam("bitvector"),
        "wrap_ignored": fam("bitvector"),
        "unsigned_for_signed": fam("bitvector"),
    }
    harmed = collections.Counter()
    for name, tasks in cases.items():
        op = model[name]
        for t in tasks[::5]:
            if op.probability(t) <= 0:
                continue
            slipped = op.apply(t, t.reference, np.random.default_rng(1))
            if slipped is not None:
                harmed[name] += int(not check(t, slipped).solved)
    assert all(harmed[name] > 0 for name in cases), harmed


def test_int_vs_real_decides_unsat_whole_number_problems() -> None:
    t = next(t for t in fam("integrality") if t.meta["expected"] == "unsat")
    assert check(t, t.reference).solved
    as_real = t.reference.replace("(declare-const x Int)", "(declare-const x Real)")
    o = check(t, as_real)
    assert not o.solved and 0 < o.score < 1 and "whole number" in o.feedback


def test_same_action_same_outcome() -> None:
    t = fam("bitvector")[5]
    wide = t.reference.replace("(_ BitVec 8)", "(_ BitVec 16)").replace("(_ BitVec 16))", "(_ BitVec 32))")
    outs = [SmtEvaluator().check(AgentState(t), Action(wide)) for _ in range(3)]
    assert len({(o.score, o.feedback, o.status, o.details.get("rlimit_used")) for o in outs}) == 1
