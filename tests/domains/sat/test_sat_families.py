"""Issue 13, SAT: conflict allowances declared or calibrated (cached), references checked, undecided
tasks dropped and counted, families discovered from any folder, labels, non-regular files and
duplicate-clause blow-ups."""

from __future__ import annotations

import functools
import math
import os
import time
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, check_all
from cm_gym.domains.base import LoadReport
from cm_gym.domains.sat import loader as satlib
from cm_gym.domains.sat.dimacs import parse_dimacs, read_dimacs
from cm_gym.domains.sat.errors import DimacsError
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.loader import load_satlib_tasks
from cm_gym.domains.sat.solver import SolverConfig, solve

# pigeonhole: 4 pigeons into 3 holes (UNSAT, needs a few conflicts), and a satisfiable formula
PHP43 = "p cnf 12 22\n1 2 3 0\n4 5 6 0\n7 8 9 0\n10 11 12 0\n" + "".join(
    f"-{a} -{b} 0\n" for h in range(3) for i, a in enumerate(range(1 + h, 13, 3)) for b in range(a + 3, 13, 3)
)
SAT3 = "p cnf 3 3\n1 2 0\n-1 3 0\n-2 -3 0\n"


@functools.cache
def evaluator() -> SatEvaluator:
    """One evaluator (one checking worker) for the module's checks."""
    return SatEvaluator()


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def conflicts(text: str, budget: int = 10**6) -> int:
    cnf = parse_dimacs(text)
    return solve(
        cnf.clauses(), cnf.n_vars, SolverConfig(satlib.REFERENCE_SOLVER, "default", False, budget)
    ).conflicts


def test_families_are_discovered_and_an_unknown_one_is_calibrated(tmp_path: Path) -> None:
    write(tmp_path, "holes/php43.cnf", PHP43)
    write(tmp_path, "holes/easy.cnf", SAT3)
    write(tmp_path, "loose.dimacs", SAT3)
    report = LoadReport()
    tasks = load_satlib_tasks(root=tmp_path, report=report)
    by_family = {t.family: t for t in tasks}
    assert set(by_family) == {"holes", tmp_path.name} and len(tasks) == 3
    needed = max(conflicts(PHP43), conflicts(SAT3))
    expected = max(satlib.ALLOWANCE_FLOOR, math.ceil(needed * satlib.CALIBRATION_MARGIN))
    assert by_family["holes"].features["max_budget"] == expected
    assert f"budget: {expected}" in by_family["holes"].reference
    assert any("holes" in subject and "calibrated" in text for subject, text in report.notes)
    for task in tasks:  # each reference decides within the task's own allowance
        assert evaluator().check(AgentState(task), Action(task.reference)).solved


def test_a_declared_family_keeps_its_allowance(tmp_path: Path) -> None:
    write(tmp_path, "uf20-91/a.cnf", SAT3)
    task = load_satlib_tasks(root=tmp_path)[0]
    assert task.features["max_budget"] == satlib.FAMILIES["uf20-91"].allowance
    assert task.meta["label"] == "sat"


def test_calibration_is_cached_per_instance_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "fam/php43.cnf", PHP43)
    first = load_satlib_tasks(root=tmp_path)

    def no_solver(*_: object) -> None:
        raise AssertionError("probed again although the content is unchanged")

    monkeypatch.setattr(satlib, "_probe", no_solver)
    again = load_satlib_tasks(root=tmp_path)
    assert [t.features for t in again] == [t.features for t in first]
    write(tmp_path, "fam/php43.cnf", PHP43.replace("p cnf 12 22", "p cnf 12 22\nc edited"))
    with pytest.raises(AssertionError, match="probed again"):
        load_satlib_tasks(root=tmp_path)


def test_tasks_the_reference_cannot_decide_are_dropped_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "fam/php43.cnf", PHP43)
    write(tmp_path, "fam/easy.cnf", SAT3)
    monkeypatch.setattr(satlib, "CALIBRATION_CAP", 1)  # php43 needs more than one conflict
    report = LoadReport()
    tasks = load_satlib_tasks(root=tmp_path, report=report)
    assert [Path(t.meta["path"]).name for t in tasks] == ["easy.cnf"]
    assert len(report.dropped) == 1 and "php43.cnf" in report.dropped[0][0]
    assert "does not decide" in report.dropped[0][1] and report.family_of[report.dropped[0][0]] == "fam"


def test_a_folder_label_the_solver_contradicts_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "fam/sat/php43.cnf", PHP43)
    report = LoadReport()
    (task,) = load_satlib_tasks(root=tmp_path, report=report)
    assert task.meta["label"] == "sat"
    assert report.disagreements and "labelled sat but the solver proves unsat" in report.disagreements[0][1]


def test_every_unreadable_file_is_listed_in_one_error(tmp_path: Path) -> None:
    write(tmp_path, "fam/good.cnf", SAT3)
    write(tmp_path, "fam/bad1.cnf", "p cnf 1 1\n7 0\n")
    write(tmp_path, "fam/bad2.cnf", "hello\n")
    with pytest.raises(DimacsError) as info:
        load_satlib_tasks(root=tmp_path)
    assert str(info.value).startswith("2 DIMACS file(s)") and "bad1.cnf" in str(info.value)
    assert "bad2.cnf" in str(info.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_like_a_dimacs_file_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "fam").mkdir()
    os.mkfifo(tmp_path / "fam" / "pipe.cnf")  # opening it for reading would wait for a writer
    write(tmp_path, "fam/good.cnf", SAT3)
    started = time.monotonic()
    with pytest.raises(DimacsError, match="not a regular file"):
        read_dimacs(tmp_path / "fam" / "pipe.cnf")
    report = LoadReport()
    assert len(load_satlib_tasks(root=tmp_path, report=report)) == 1
    assert "pipe.cnf" in report.refused[0][0] and time.monotonic() - started < 30


def test_duplicate_clauses_and_literals_are_removed(tmp_path: Path) -> None:
    copies = 300_000  # 3.3 MB of one clause: the solver sees it once
    cnf = parse_dimacs(f"p cnf 3 {copies + 2}\n" + "1 -2 3 0\n" * copies + "2 2 -3 0\n-1 0\n")
    assert cnf.clauses() == [[1, -2, 3], [2, -3], [-1]] and cnf.duplicates == copies - 1
    assert cnf.n_clauses == 3
    write(tmp_path, "fam/dups.cnf", f"p cnf 3 {copies}\n" + "1 -2 3 0\n" * copies)
    (task,) = load_satlib_tasks(root=tmp_path)
    assert task.features["n_clauses"] == 1
    assert evaluator().check(AgentState(task), Action(task.reference)).solved


def test_a_batch_of_actions_scores_like_one_check_each(tmp_path: Path) -> None:
    write(tmp_path, "fam/php43.cnf", PHP43)
    (task,) = load_satlib_tasks(root=tmp_path)
    allowance = task.features["max_budget"]
    actions = [
        Action(task.reference),
        Action(f"solver: minisat22\nbudget: {allowance + 1}"),  # refused: over the allowance
        Action("solver: maplechrono\nbudget: 1"),  # budget
        Action("not a configuration"),  # error
    ]
    one_by_one = [evaluator().check(AgentState(task), a) for a in actions]
    batched = check_all(evaluator(), AgentState(task), actions)  # uses SatEvaluator.check_many
    assert [(o.status, o.solved, o.reason) for o in batched] == [
        (o.status, o.solved, o.reason) for o in one_by_one
    ]
    assert [o.status for o in batched] == ["ok", "refused", "budget", "error"]
