"""The SMT-LIB sandbox and z3 runner: whitelist, refusals with reasons, size caps, budgets."""

from __future__ import annotations

import re

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.smt.errors import ScriptError, ScriptRefused, SexprError
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.generated import generate_smt_tasks
from cm_gym.domains.smt.sandbox import vet_script
from cm_gym.domains.smt.sexpr import parse_sexprs, render

TASK = generate_smt_tasks(0)[0]  # a "bounds" task over x, y, z
OK = "(set-logic QF_LIA)\n(declare-const x Int)\n(assert (> x 2))\n(check-sat)\n(get-model)"


def outcome(text: str, rlimit: int = 5_000_000):  # type: ignore[no-untyped-def]
    return SmtEvaluator(rlimit=rlimit).check(AgentState(TASK), Action(text))


def test_sexpr_reader_handles_comments_quotes_and_reports_lines() -> None:
    exprs = parse_sexprs('; c\n(assert (= |a b| "x""y"))\n\n(check-sat) ; end')
    assert [e.line for e in exprs] == [2, 4]
    assert render(exprs[0].expr) == '(assert (= |a b| "x""y"))'
    for bad, msg in [
        ("(a", "unbalanced '('"),
        ("a)", "outside parentheses"),
        (")", "unbalanced ')'"),
        ("(" * 500 + ")" * 500, "deeper"),
    ]:
        with pytest.raises(SexprError, match=re.escape(msg)):
            parse_sexprs(bad)


def test_allowed_script_is_vetted_with_declared_sorts() -> None:
    v = vet_script(
        "(set-logic QF_BV)\n(define-sort W () (_ BitVec 8))\n(declare-const x W)\n(declare-fun y () Int)\n(assert (= y 1))\n(check-sat)\n(get-value (y))"
    )
    assert v.logic == "QF_BV" and v.declared == {"x": "(_ BitVec 8)", "y": "Int"} and v.n_asserts == 1
    assert "check-sat" not in v.body and "get-value" not in v.body


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("(declare-const x Int)\n(exit)", "(exit) is not allowed"),
        ("(declare-const x Int)\n(reset)", "(reset) is not allowed"),
        ("(push 1)\n(declare-const x Int)\n(pop 1)", "push/pop"),
        ('(include "/etc/passwd")', "may not read files"),
        ("(declare-const x Int)\n(check-sat-assuming (x))", "check-sat-assuming"),
        ("(set-option :timeout 100000000)", "option ':timeout' is not allowed"),
        ("(set-option :rlimit 0)", "option ':rlimit' is not allowed"),
        ("(declare-const x Int)\n(check-sat)\n(assert (> x 1))\n(check-sat)", "after (check-sat)"),
        ("(declare-const x Int)\n(check-sat)\n(check-sat)", "only one (check-sat)"),
        ("(declare-const x (_ BitVec 100000))", "sort of 100000 bits"),
        ("(assert (> x " + "9" * 300 + "))", "numeral with 300 digits"),
        ("(eval x)", "command 'eval' is not allowed"),
        ("(define-fun-rec f ((a Int)) Int (f a))", "recursive"),
        ("(p)" * 1700, "too large"),
        ("(assert true)" + " " * 30_000, "characters; the limit"),
    ],
)
def test_forbidden_scripts_are_refused_with_a_reason(script: str, reason: str) -> None:
    with pytest.raises(ScriptRefused, match=re.escape(reason)):
        vet_script(script)
    o = outcome(script)
    assert (o.score, o.solved, o.status) == (0.0, False, "refused") and reason in o.reason


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ("(assert (> x 2)", "unbalanced"),
        ("assert x", "outside parentheses"),
        ("", "no commands"),
        ("(declare-const x Int)\n(assert (> x y))", "unknown constant y"),
        ("((assert true))", "expected a command"),
    ],
)
def test_malformed_scripts_are_error_outcomes(script: str, fragment: str) -> None:
    if fragment != "unknown constant y":
        with pytest.raises(ScriptError):
            vet_script(script)
    o = outcome(script)
    assert (o.score, o.solved, o.status) == (0.0, False, "error") and fragment in o.reason


def test_resource_limit_bounds_a_hard_script() -> None:
    # a non-linear factoring problem that z3 cannot finish in 2000 resource units
    hard = (
        "(declare-const p Int)\n(declare-const q Int)\n(assert (> p 1))\n(assert (> q 1))\n"
        "(assert (= (* p q) 1000000016000000063))\n(check-sat)"
    )
    o = outcome(hard, rlimit=2000)
    assert (o.solved, o.status) == (False, "budget") and "unknown" in o.reason


def test_wrong_names_score_low_not_crash() -> None:
    o = outcome("(declare-const a Int)\n(assert (> a 2))\n(check-sat)")
    assert not o.solved and o.status == "ok" and "no value in the model" in o.feedback and o.score < 0.5


def test_evaluator_settings_are_validated() -> None:
    from cm_gym.domains.smt.errors import SmtConfigError

    with pytest.raises(SmtConfigError):
        SmtEvaluator(rlimit=0)


def test_solver_configurations_are_parsed_once_and_bad_ones_always_refused() -> None:
    """`smt.solver.parse_config` is cached: the same text gives the same config object; a
    refused or malformed one raises on every call."""
    from cm_gym.domains.smt.errors import SmtConfigError, SmtConfigRefused
    from cm_gym.domains.smt.solver import SmtConfig, parse_config

    text = "logic: QF_LIA\nrlimit: 1000"
    assert parse_config(text) is parse_config(text) == SmtConfig("QF_LIA", "default", 1000)
    for _ in range(2):
        with pytest.raises(SmtConfigRefused):
            parse_config("logic: QF_LIA\ntactic: qflia\nrlimit: 1000")
        with pytest.raises(SmtConfigError):
            parse_config("logic: QF_LIA")
