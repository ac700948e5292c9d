"""The Coq world model on statements written here: a proof scores 1 only when coqc accepts Qed
and every assumption is an allowed fully qualified axiom; a failed proof scores 0 whatever goals
it closed (its feedback still locates the failure and counts the goals); admitted helpers and
libraries outside the fixed list are refused; verdicts are cached and parallel checks agree with
sequential ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.math.evaluator import MathEvaluator
from tests.domains.math.conftest import make_evaluator, synthetic_task

pytestmark = pytest.mark.coq

CONJ = synthetic_task("Theorem conj3 : forall n : nat, n + 0 = n /\\ (n = n /\\ 0 + n = n).", "conj3")


def _check(ev: MathEvaluator, task, script: str):  # type: ignore[no-untyped-def]
    return ev.check(AgentState(task), Action(script))


def test_closed_proof_scores_one_with_coqs_own_assumption_check(evaluator: MathEvaluator) -> None:
    o = _check(evaluator, CONJ, "Require Import Lia.\nintros.\nsplit.\n- lia.\n- split; reflexivity.")
    assert o.solved and o.score == 1.0 and o.status == "ok"
    assert o.details["assumptions"] == [] and "closed under the global context" in o.feedback
    real = synthetic_task(
        "Require Import Reals.\nOpen Scope R_scope.\nTheorem r : forall x : R, x * 1 + 0 = x.", "r"
    )
    o = _check(evaluator, real, "Require Import Lra.\nintros.\nlra.")
    assert o.solved and o.details["assumptions"]  # R's axioms, from the standard library
    assert "Coq.Reals.ClassicalDedekindReals.sig_forall_dec" in o.details["assumptions"]
    assert all(a.startswith("Coq.") for a in o.details["assumptions"])  # by their full names


@pytest.mark.parametrize(
    ("script", "where", "goals"),
    [
        (
            "Require Import Lia.\nintros.\nsplit.\n- lia.\n- split.\n  + reflexivity.\n  + discriminate.",
            "line 7 `+ discriminate.` (1 goal(s) open, 2 closed before it)",
            [1, 1, 2, 2, 1, 1, 2, 2, 1, 1],
        ),
        ("Require Import Lia.\nintros.\nsplit.\n- lia.", "at Qed, after the whole script (1 goal(s)", None),
        ("discriminate.", "line 1 `discriminate.`", [1]),
        ("intros.\nlia.", "reference lia was not found", None),
    ],
)
def test_a_failed_proof_scores_zero_and_says_where_it_failed(
    evaluator: MathEvaluator, script: str, where: str, goals: list[int] | None
) -> None:
    o = _check(evaluator, CONJ, script)
    assert not o.solved and o.status == "ok" and o.score == 0.0
    assert where in o.feedback
    if goals is not None:
        assert o.details["open_goals"] == goals


def test_admitted_helper_is_not_a_proof_but_declared_axioms_are_allowed(evaluator: MathEvaluator) -> None:
    helper = synthetic_task("Lemma helper : 1 = 2.\nProof. Admitted.\nTheorem bad : 1 = 2.", "bad")
    o = _check(evaluator, helper, "exact helper.")
    assert not o.solved and o.score == 0.0 and "helper" in o.feedback
    declared = synthetic_task("Parameter c : nat.\nAxiom c_spec : c = 3.\nTheorem good : c + 1 = 4.", "good")
    o = _check(evaluator, declared, "rewrite c_spec.\nreflexivity.")
    assert o.solved and "task.c_spec" in o.details["assumptions"]  # by its full name


def test_statement_and_library_problems(evaluator: MathEvaluator) -> None:
    broken = synthetic_task("Require Import Coquelicot.Coquelicot.\nTheorem q : True.", "q")
    o = _check(evaluator, broken, "exact I.")
    assert o.status == "error" and o.score == 0.0 and "statement does not load" in o.feedback
    runs = evaluator.runs
    for script, why in [("Require Import Coquelicot.Coquelicot.\nlia.", "not in Coq's standard library"),
                        ("Require Import Tactics.\nlia.", "ambiguous"),
                        ("Require Import Extraction.\nlia.", "not in Coq's standard library")]:  # fmt: skip
        o = _check(evaluator, CONJ, script)
        assert o.status == "refused" and why in o.feedback
    assert evaluator.runs == runs  # refused before coqc ran


def test_verdicts_are_cached_on_disk_and_a_corrupt_cache_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.sqlite"
    first = make_evaluator(cache=path)
    script = "Require Import Lia.\nintros.\nsplit.\n- lia.\n- split; reflexivity."
    a, b = _check(first, CONJ, script), _check(first, CONJ, script)
    assert first.runs == 1 and a.score == b.score == 1.0 and b.details["cached"]
    again = make_evaluator(cache=path)
    assert _check(again, CONJ, script).solved and again.runs == 0
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database" * 100)
    before = bad.read_bytes()
    fallback = make_evaluator(cache=bad)
    assert _check(fallback, CONJ, script).solved and fallback.runs == 1
    assert bad.read_bytes() == before


def test_parallel_checks_agree_with_sequential_ones(evaluator: MathEvaluator) -> None:
    scripts = ["Require Import Lia.\nintros.\nsplit.\n- lia.", "discriminate.", "intros.\nsplit."]
    par = make_evaluator(workers=2).check_many(AgentState(CONJ), [Action(s) for s in scripts])
    seq = [_check(evaluator, CONJ, s) for s in scripts]
    assert [(o.score, o.status) for o in par] == [(o.score, o.status) for o in seq]
