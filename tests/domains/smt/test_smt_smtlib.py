"""SMT-LIB loading (``:status`` and logic from the header) and the z3-configuration world model,
on files written here and on the shared SMT-LIB subsets (``@pytest.mark.data``)."""

from __future__ import annotations

import collections
import functools
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.smt.errors import SmtConfigError, SmtConfigRefused, SmtLibError
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.loader import ALLOWANCE, load_smtlib_tasks
from cm_gym.domains.smt.smtlib import parse_smtlib, read_smtlib
from cm_gym.domains.smt.solver import SmtConfig, parse_config

SAT_FILE = """(set-info :smt-lib-version 2.6)
(set-logic QF_LIA)
(set-info :status sat)
(declare-fun x () Int)
(declare-fun y () Int)
(assert (and (> (+ x y) 3) (< x 2) (< y 4)))
(check-sat)
(exit)
"""
UNSAT_FILE = SAT_FILE.replace(":status sat", ":status unsat").replace("(< y 4)", "(< y 3)")
NONLINEAR = SAT_FILE.replace("(> (+ x y) 3)", "(> (* x y) 3)").replace("QF_LIA", "QF_NIA")


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tasks_in(tmp_path: Path) -> dict[str, Task]:
    write(tmp_path, "QF_LIA/sat/a.smt2", SAT_FILE)
    write(tmp_path, "QF_LIA/unsat/b.smt2", UNSAT_FILE)
    return {t.meta["status"]: t for t in load_smtlib_tasks(root=tmp_path / "QF_LIA")}


@functools.cache
def evaluator() -> SmtEvaluator:
    """One evaluator (one checking worker) for the module's checks."""
    return SmtEvaluator()


def check(task: Task, text: str) -> Outcome:
    return evaluator().check(AgentState(task), Action(text))


def test_header_facts() -> None:
    info = parse_smtlib(SAT_FILE, "a.smt2")
    assert (info.logic, info.status, info.n_asserts, info.n_decls) == ("QF_LIA", "sat", 1, 2)
    assert not info.has_nonlinear and not info.uses_bitvectors
    assert parse_smtlib(NONLINEAR, "n.smt2").has_nonlinear
    assert not parse_smtlib(SAT_FILE.replace("(> (+ x y) 3)", "(> (* (/ 1 3) x) 3)"), "c.smt2").has_nonlinear


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (SAT_FILE.replace("(set-info :status sat)", "(set-info :status maybe)"), ":status maybe"),
        (SAT_FILE.replace("(set-logic QF_LIA)", ""), "no (set-logic"),
        (SAT_FILE.replace("(check-sat)", "(check-sat"), "unbalanced"),
        (SAT_FILE.replace("(check-sat)", "(push 1) (check-sat)"), "incremental"),
        (SAT_FILE.replace("(check-sat)", "(check-sat) (check-sat)"), "incremental"),
    ],
)
def test_malformed_files_raise_one_error_naming_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, "bad.smt2", text)
    with pytest.raises(SmtLibError) as info:
        read_smtlib(path)
    assert str(path) in str(info.value) and fragment in str(info.value)
    with pytest.raises(SmtLibError, match="bad.smt2"):
        load_smtlib_tasks(root=tmp_path)


def test_status_is_hidden_and_ids_do_not_leak_it(tmp_path: Path) -> None:
    tasks = tasks_in(tmp_path)
    for status, task in tasks.items():
        assert status not in task.task_id.split("-") and "unsat" not in task.prompt + task.context
        assert task.features["kind"] == "solver" and task.features["max_rlimit"] == ALLOWANCE["QF_LIA"]


def test_matching_status_scores_one_and_models_are_checked(tmp_path: Path) -> None:
    tasks = tasks_in(tmp_path)
    for task in tasks.values():
        o = check(task, task.reference)
        assert o.solved and o.details["verdict"] == task.meta["status"], o.feedback
    o = check(tasks["sat"], "logic: QF_LIA\ntactic: (then simplify smt)\nrlimit: 100000")
    assert o.solved and "model" in o.feedback


@pytest.mark.parametrize(
    ("config", "status", "fragment"),
    [
        ("logic: QF_LIA\nrlimit: 99999999", "refused", "allowance"),
        ("logic: QF_LIA\ntactic: (par-or smt qflia)\nrlimit: 1000", "refused", "non-deterministic"),
        ("logic: QF_LIA\ntactic: (try-for smt 100)\nrlimit: 1000", "refused", "wall-clock"),
        ("logic: QF_XYZ\nrlimit: 1000", "error", "unknown logic"),
        ("logic: QF_LIA\ntactic: magic\nrlimit: 1000", "error", "unknown tactic"),
        ("logic: QF_LIA\ntactic: (then smt\nrlimit: 1000", "error", "malformed tactic"),
        ("logic: QF_LIA", "error", "needs 'rlimit:'"),
        ("logic: QF_LIA\nrlimit: lots", "error", "positive integer"),
        ("(assert true)", "error", "key: value"),
    ],
)
def test_bad_configurations_are_scored(tmp_path: Path, config: str, status: str, fragment: str) -> None:
    o = check(tasks_in(tmp_path)["sat"], config)
    assert (o.score, o.solved, o.status) == (0.0, False, status) and fragment in o.reason


def test_incomplete_tactic_and_tiny_rlimit_fail(tmp_path: Path) -> None:
    task = tasks_in(tmp_path)["unsat"]
    weak = check(task, "logic: QF_LIA\ntactic: simplify\nrlimit: 100000")
    assert not weak.solved and weak.details["verdict"] == "unknown"


def test_config_round_trip_and_errors() -> None:
    cfg = SmtConfig("QF_BV", "(then simplify (or-else qfbv smt))", 12345)
    assert parse_config(cfg.render()) == cfg
    with pytest.raises(SmtConfigError):
        parse_config("rlimit: 1\nrlimit: 2")
    with pytest.raises(SmtConfigRefused):
        parse_config("rlimit: 999999999999")


@pytest.mark.data
def test_loader_reads_every_shared_file(shared_data: Path) -> None:
    tasks = load_smtlib_tasks()
    counts = collections.Counter((t.features["logic"], t.meta["status"]) for t in tasks)
    assert counts == {
        ("QF_LIA", "sat"): 66,
        ("QF_LIA", "unsat"): 98,
        ("QF_LRA", "sat"): 338,
        ("QF_LRA", "unsat"): 161,
        ("QF_BV", "sat"): 153,
        ("QF_BV", "unsat"): 150,
    }
    assert len({t.task_id for t in tasks}) == len(tasks) == 966
    sample = load_smtlib_tasks(logics=["QF_BV"], limit=6)
    assert {t.meta["status"] for t in sample} == {"sat", "unsat"} and len(sample) == 6
    assert load_smtlib_tasks(families=["QF_LRA"], limit=2)[0].features["logic"] == "QF_LRA"


@pytest.mark.data
def test_statuses_reproduced_on_a_sample(shared_data: Path) -> None:
    ev = evaluator()
    tasks = load_smtlib_tasks(logics=["QF_LRA", "QF_BV"], limit=24) + load_smtlib_tasks(
        logics=["QF_LIA"], limit=10
    )
    solved = [ev.check(AgentState(t), Action(t.reference)) for t in tasks]
    assert all(o.solved for o in solved), [
        (t.task_id, o.feedback) for t, o in zip(tasks, solved, strict=True) if not o.solved
    ]


@pytest.mark.data
def test_a_misleading_logic_gives_wrong_answers(shared_data: Path) -> None:
    tasks = load_smtlib_tasks(logics=["QF_BV"], limit=40)
    ev = evaluator()
    outs = [ev.check(AgentState(t), Action("logic: QF_LRA\nrlimit: 2000000")) for t in tasks]
    assert sum(not o.solved for o in outs) >= 3
    assert any("contradicts" in o.feedback for o in outs)
