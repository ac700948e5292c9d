"""Issue 13, SMT: any SMT-LIB logic, sound checks of quantified models, unknown statuses, every bad
file in one message, folder labels that contradict headers, calibrated allowances."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import z3

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.smt import loader
from cm_gym.domains.smt.errors import SmtConfigError, SmtLibError
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.loader import load_smtlib_tasks, smtlib_task
from cm_gym.domains.smt.logics import is_logic_name, solver_logic
from cm_gym.domains.smt.modelcheck import decide_model
from cm_gym.domains.smt.smtlib import parse_smtlib
from cm_gym.domains.smt.solver import SmtConfig, parse_config, run

# A quantified benchmark whose model leaves a closed quantified formula after evaluation: the
# universe of S has exactly two elements (a, b distinct and everything equal to one of them).
UNIVERSE = """(set-logic UF)
(set-info :status sat)
(declare-sort S 0)
(declare-fun a () S)
(declare-fun b () S)
(declare-fun p (S) Bool)
(assert (not (= a b)))
(assert (forall ((x S)) (or (= x a) (= x b))))
(assert (exists ((x S)) (p x)))
(assert (not (forall ((x S) (y S)) (= x y))))
(check-sat)
"""
# Arithmetic under a quantifier: evaluating it in the model leaves a closed quantified formula.
ARITH = """(set-logic LIA)
(set-info :status {status})
(declare-fun c () Int)
(assert (forall ((x Int)) (=> (> x c) (> x 3))))
(assert (exists ((x Int)) (and (> x c) (< x (+ c 2)))))
(assert (> c 3))
{extra}(check-sat)
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def check(task: Task, text: str | None = None, **kw: object) -> Outcome:
    return SmtEvaluator(isolated=False, **kw).check(AgentState(task), Action(text or task.reference))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "logic",
    [
        "QF_AX",
        "LIA",
        "AUFLIA",
        "LRA",
        "BV",
        "UFDTLIA",
        "QF_SLIA",
        "ABVFPLRA",
        "QF_UFBVDT",
        "ALL",
        "HORN",
        "UF",
    ],
)
def test_every_smtlib_logic_name_is_accepted_and_the_reference_parses(logic: str) -> None:
    cfg = parse_config(f"logic: {logic}\nrlimit: 1000")
    assert cfg.logic == logic and is_logic_name(logic)
    assert solver_logic(logic) in (logic, "auto")
    info = parse_smtlib(UNIVERSE.replace("(set-logic UF)", f"(set-logic {logic})"), f"x-{logic}.smt2")
    task = smtlib_task(info, "t", 1000)
    assert parse_config(task.reference).logic == logic


@pytest.mark.parametrize("name", ["QF_XYZ", "QF_", "qf_lia", "LOGIC WITH SPACES"])
def test_names_outside_smtlib_are_refused(name: str) -> None:
    with pytest.raises(SmtConfigError, match="unknown logic"):
        parse_config(f"logic: {name}\nrlimit: 1000")


def test_a_file_in_a_logic_outside_the_grammar_gets_an_auto_reference() -> None:
    info = parse_smtlib(UNIVERSE.replace("(set-logic UF)", "(set-logic MY_OWN_LOGIC)"), "mine.smt2")
    assert parse_config(smtlib_task(info, "t", 1000).reference).logic == "auto"


def test_quantified_models_are_decided_under_the_model(tmp_path: Path) -> None:
    """model.eval leaves these assertions quantified; the old check called the answer wrong."""
    write(tmp_path, "sat/universe.smt2", UNIVERSE)
    write(tmp_path, "sat/arith.smt2", ARITH.format(status="sat", extra=""))
    tasks = load_smtlib_tasks(root=tmp_path)
    assert {t.family for t in tasks} == {"UF", "LIA"}
    for task in tasks:
        o = check(task)
        assert o.solved, o.feedback
        assert o.details["model_true"] >= 2 and o.details["model_false"] == 0


def test_an_assertion_false_in_the_model_makes_the_answer_wrong() -> None:
    ctx = z3.Context()
    x = z3.Int("x", ctx)
    f = z3.Function("f", z3.IntSort(ctx), z3.IntSort(ctx))
    s = z3.Solver(ctx=ctx)
    s.add(x == 1, f(x) == 0)
    assert s.check() == z3.sat
    quantified = z3.ForAll([x], f(x) > x)  # false in any model with f(1) = 0
    verdict = decide_model(s.model(), [quantified, x >= 0], ctx)
    assert verdict.verdict == "false" and verdict.false == 1


def test_an_undecided_assertion_is_reported_as_undecided_not_false(tmp_path: Path) -> None:
    write(tmp_path, "universe.smt2", UNIVERSE)
    task = load_smtlib_tasks(root=tmp_path)[0]
    o = check(task, model_rlimit=1)
    assert (o.solved, o.status) == (False, "undecided")
    assert "could not be decided" in o.feedback and "false in the returned model" not in o.feedback


def test_unknown_and_missing_statuses_load_and_are_checked_without_a_status(tmp_path: Path) -> None:
    write(tmp_path, "unknown_sat.smt2", ARITH.format(status="unknown", extra=""))
    unsat = ARITH.format(status="unknown", extra="(assert (< c 0))\n")
    write(tmp_path, "unknown_unsat.smt2", unsat)
    write(tmp_path, "missing.smt2", unsat.replace("(set-info :status unknown)\n", ""))
    report = LoadReport()
    tasks = load_smtlib_tasks(root=tmp_path, report=report)
    assert len(tasks) == 3 and not report.refused and not report.dropped
    verdicts = {}
    for task in tasks:
        assert task.meta["status"] == "unknown"
        o = check(task)
        assert o.solved, o.feedback
        verdicts[Path(task.meta["path"]).stem] = o.details["verdict"]
    assert verdicts == {"unknown_sat": "sat", "unknown_unsat": "unsat", "missing": "unsat"}


def test_every_bad_file_is_listed_in_one_message(tmp_path: Path) -> None:
    write(tmp_path, "good.smt2", ARITH.format(status="sat", extra=""))
    write(tmp_path, "a_unbalanced.smt2", "(set-logic QF_LIA)\n(assert (> x 1)\n")
    write(tmp_path, "b_nologic.smt2", "(set-info :status sat)\n(check-sat)\n")
    write(tmp_path, "c_status.smt2", "(set-logic QF_LIA)\n(set-info :status perhaps)\n")
    with pytest.raises(SmtLibError) as info:
        load_smtlib_tasks(root=tmp_path)
    message = str(info.value)
    assert message.startswith("3 SMT-LIB file(s) cannot be loaded")
    assert all(name in message for name in ("a_unbalanced", "b_nologic", "c_status"))
    report = LoadReport()
    assert len(load_smtlib_tasks(root=tmp_path, report=report)) == 1 and len(report.refused) == 3


def test_labels_that_contradict_the_header_are_reported(tmp_path: Path) -> None:
    write(tmp_path, "QF_LIA/unsat/labelled_wrong.smt2", ARITH.format(status="sat", extra=""))
    report = LoadReport()
    tasks = load_smtlib_tasks(root=tmp_path, report=report)
    assert len(tasks) == 1 and tasks[0].meta["label"] == "unsat" and tasks[0].family == "LIA"
    said = " | ".join(why for _, why in report.disagreements)
    assert "folder label 'unsat' contradicts the header's :status sat" in said
    assert "in folder 'QF_LIA' but the header says (set-logic LIA)" in said


def test_an_undeclared_logic_is_calibrated_and_undecided_files_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        write(tmp_path, f"f{i}.smt2", ARITH.format(status="sat", extra=f"(assert (> c {10 * i}))\n"))
    used = [
        run(p.read_text(), SmtConfig("LIA", "default", loader.CALIBRATION_CAP)).rlimit_used
        for p in tmp_path.iterdir()
    ]
    tasks = load_smtlib_tasks(root=tmp_path)
    expected = max(loader.ALLOWANCE_FLOOR, math.ceil(max(used) * loader.CALIBRATION_MARGIN))
    assert {t.features["max_rlimit"] for t in tasks} == {expected}
    # a cap the reference cannot decide within: every task is dropped, and counted
    monkeypatch.setattr(loader, "CALIBRATION_CAP", 1)
    write(tmp_path, "f9.smt2", ARITH.format(status="sat", extra="(assert (> c 99))\n"))
    report = LoadReport()
    kept = load_smtlib_tasks(root=tmp_path, report=report)
    assert "f9.smt2" not in " ".join(t.meta["path"] for t in kept)
    assert any("f9.smt2" in name and "does not decide" in why for name, why in report.dropped)


@pytest.mark.data
def test_quantified_public_benchmarks_are_judged_right(shared_data: Path) -> None:
    """On the shared AUFLIA/LRA sat files most correct answers were scored wrong before."""
    report = LoadReport()
    tasks = load_smtlib_tasks(root=shared_data / "smt" / "AUFLIA", limit=12, report=report)
    tasks += load_smtlib_tasks(root=shared_data / "smt" / "LRA", limit=6, report=report)
    quantified = [t for t in tasks if t.features["quantified"]]
    assert len(quantified) >= 12 and not report.refused
    outcomes = [check(t) for t in quantified]
    assert all(o.solved for o in outcomes), [o.feedback for o in outcomes if not o.solved]
    assert sum(o.details.get("verdict") == "sat" for o in outcomes) >= 6
