"""SAT checks bounded before they run skip the worker (`cm_gym.domains.sat.bounds`, issue 35): the
same verdict as the worker's, the unbounded ones still in the worker, and the SATLIB families'
reference checks among the bounded ones (``@pytest.mark.data``)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.sat.bounds import (
    BUDGET_SLACK,
    MAX_FILE_BYTES,
    MAX_WORK,
    OVERSHOOTING_SOLVERS,
    bounded_solver_check,
    solver_work,
)
from cm_gym.domains.sat.dimacs import read_dimacs
from cm_gym.domains.sat.errors import SolverConfigError
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.generated import generate_encoding_tasks
from cm_gym.domains.sat.loader import load_satlib_tasks, satlib_task
from cm_gym.domains.sat.solver import BUDGET_SOLVERS, SolverConfig, solve

PHP_CNF = "p cnf 6 9\n1 2 0\n3 4 0\n5 6 0\n-1 -3 0\n-1 -5 0\n-3 -5 0\n-2 -4 0\n-2 -6 0\n-4 -6 0\n"


def random_3sat(n_vars: int, n_clauses: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    lines = [f"p cnf {n_vars} {n_clauses}"]
    for _ in range(n_clauses):
        picked = rng.choice(np.arange(1, n_vars + 1), size=3, replace=False)
        lines.append(" ".join(str(int(v) * int(rng.choice([-1, 1]))) for v in picked) + " 0")
    return "\n".join(lines) + "\n"


def task_for(tmp_path: Path, name: str, text: str, allowance: int) -> Task:
    path = tmp_path / name
    path.write_text(text)
    return satlib_task(read_dimacs(path), "probe", path, allowance, task_id=name)


@functools.cache
def evaluators() -> tuple[SatEvaluator, SatEvaluator]:
    """(auto, worker-only), their verdicts not kept (every check runs)."""
    auto, worker = SatEvaluator(), SatEvaluator(isolation="worker")
    auto.memo.size = worker.memo.size = 0
    return auto, worker


def both(task: Task, text: str) -> tuple[Outcome, Outcome, bool]:
    """(auto's Outcome, the worker's, whether auto checked it in this process)."""
    auto, worker = evaluators()
    before = auto._checks.local_checks
    here = auto.check(AgentState(task), Action(text))
    return here, worker.check(AgentState(task), Action(text)), auto._checks.local_checks == before + 1


def test_work_bound_grows_with_every_term() -> None:
    base = solver_work(50, 200, 3, 100)
    assert solver_work(51, 200, 3, 100) > base and solver_work(50, 201, 3, 100) > base
    assert solver_work(50, 200, 4, 100) > base and solver_work(50, 200, 3, 101) > base
    # learned clauses dominate: the bound grows with the square of the budget
    assert solver_work(50, 0, 1, 400) > 3.5 * solver_work(50, 0, 1, 200)


def test_bounded_checks_run_here_with_the_workers_verdict(tmp_path: Path) -> None:
    sat = task_for(tmp_path, "r40.cnf", random_3sat(40, 150, 1), 500)
    hard = task_for(tmp_path, "r60.cnf", random_3sat(60, 270, 2), 300)
    php = task_for(tmp_path, "php.cnf", PHP_CNF, 500)
    texts = [SolverConfig(s, "default", False, 300).render() for s in BUDGET_SOLVERS]
    texts += [
        SolverConfig("minisat22", phase, False, b).render() for phase in ("true", "false") for b in (1, 3, 40)
    ]
    for task in (sat, hard, php):
        for text in texts:
            here, there, local = both(task, text)
            assert local == (text.split()[1] not in OVERSHOOTING_SOLVERS), (task.task_id, text)
            assert here == there, (task.task_id, text, here, there)
    verdicts = {both(t, texts[0])[0].details.get("verdict") for t in (sat, php)}
    assert verdicts == {"sat", "unsat"}  # both answers were compared, not only budget hits


@pytest.mark.parametrize(
    "text",
    [
        "solver: minisat22\nbudget: 100000",  # over the allowance: refused before solving
        "solver: lingeling\nbudget: 10",  # no deterministic budget: refused
        "solver: nosuch\nbudget: 10",
        "budget: 10",
        "solver: minisat22\nbudget: -3",
        "garbage",
    ],
)
def test_actions_that_end_before_solving_are_answered_here_like_the_worker(tmp_path: Path, text: str) -> None:
    task = task_for(tmp_path, "php.cnf", PHP_CNF, 50)
    here, there, local = both(task, text)
    assert local and here == there and not here.solved


def test_unbounded_checks_still_go_to_the_worker(tmp_path: Path) -> None:
    big_text = random_3sat(300, 1, 3) + "".join(
        f"{i % 300 + 1} {-(i * 7 % 300 + 1)} {i * 13 % 299 + 2} 0\n" for i in range(7000)
    )
    big_text = big_text.replace("p cnf 300 1", "p cnf 300 7001")
    big = task_for(tmp_path, "big.cnf", big_text, 10)
    assert big.meta["path"] and Path(big.meta["path"]).stat().st_size > MAX_FILE_BYTES
    free = task_for(tmp_path, "free.cnf", random_3sat(120, 500, 4), 0)  # no allowance
    cases = [
        (big, "solver: minisat22\nbudget: 5"),  # file over the size cap
        (free, "solver: minisat22\nbudget: 5000000"),  # budget far over the work bound
        (task_for(tmp_path, "pp.cnf", PHP_CNF, 50), "solver: minisat22\npreprocess: on\nbudget: 10"),
    ]
    for task, text in cases:
        assert not bounded_solver_check(task, text)
        here, there, local = both(task, text)
        assert not local and here == there
    n_vars, literals, width = 120, 1500, 3
    assert solver_work(n_vars, literals, width, 5_000_000) > MAX_WORK


def test_encoding_tasks_and_missing_files_go_to_the_worker(tmp_path: Path) -> None:
    encoding = generate_encoding_tasks(0)[0]
    assert not bounded_solver_check(encoding, encoding.reference)
    here, there, local = both(encoding, encoding.reference)
    assert not local and here == there and here.solved
    gone = task_for(tmp_path, "gone.cnf", PHP_CNF, 50)
    Path(gone.meta["path"]).unlink()
    assert not bounded_solver_check(gone, "solver: minisat22\nbudget: 10")


def test_isolation_is_auto_or_worker_and_kept_verdicts_still_answer(tmp_path: Path) -> None:
    with pytest.raises(SolverConfigError, match="isolation"):
        SatEvaluator(isolation="none")
    task = task_for(tmp_path, "php.cnf", PHP_CNF, 50)
    ev = SatEvaluator()
    first = ev.check(AgentState(task), Action(task.reference))
    again = ev.check(AgentState(task), Action(task.reference))
    assert first == again and ev._checks.local_checks == 2 and ev.memo.hits == 1
    assert ev._checks._worker is None  # no worker was started for bounded checks
    batch = ev.check_batch(
        [
            (AgentState(task), Action(t))
            for t in (task.reference, "solver: minisat22\npreprocess: on\nbudget: 9")
        ]
    )
    assert batch[0] == first and batch[1].solved and ev._checks._worker is not None


@pytest.mark.data
def test_satlib_reference_checks_are_bounded_and_agree_with_the_worker(shared_data: Path) -> None:
    for fam in ("uf20-91", "uf50-218", "uuf50-218", "flat30-60", "flat100-239"):
        for task in load_satlib_tasks(families=[fam], limit=6):
            assert bounded_solver_check(task, task.reference), task.task_id
            for text in (task.reference, task.reference.replace("phase: default", "phase: true")):
                here, there, local = both(task, text)
                assert local and here == there, (task.task_id, text)


def test_solvers_checked_here_keep_their_budget_and_glucose_goes_to_the_worker(tmp_path: Path) -> None:
    """The bound assumes conflicts <= budget + BUDGET_SLACK: true of every solver allowed here on
    threshold 3-SAT, where Glucose's budget is not (it checks it between restarts only)."""
    overshoot: set[str] = set()
    for n_vars in (200, 300):
        text = random_3sat(n_vars, int(4.26 * n_vars), n_vars)
        clauses = [[int(x) for x in line.split()[:-1]] for line in text.splitlines()[1:]]
        for budget in (50, 157):
            for name in BUDGET_SOLVERS:
                conflicts = solve(clauses, n_vars, SolverConfig(name, "default", False, budget)).conflicts
                if name not in OVERSHOOTING_SOLVERS:
                    assert conflicts <= budget + BUDGET_SLACK, (name, n_vars, budget, conflicts)
                elif conflicts > budget + BUDGET_SLACK:
                    overshoot.add(name)
    assert overshoot, "no listed solver overshoots any more: the list may be out of date"
    task = task_for(tmp_path, "r40.cnf", random_3sat(40, 150, 1), 500)
    assert not bounded_solver_check(task, "solver: glucose4\nbudget: 50")
    assert bounded_solver_check(task, "solver: minisat22\nbudget: 50")


def test_a_decision_past_the_budget_is_a_budget_verdict(tmp_path: Path) -> None:
    """Glucose decides long after its budget: that decision does not count (`solver.solve`). No
    other solver ever decides past its budget, so the rule changes none of their verdicts."""
    from pysat.solvers import Solver

    text = random_3sat(200, 852, 200)
    clauses = [[int(x) for x in line.split()[:-1]] for line in text.splitlines()[1:]]
    for name in BUDGET_SOLVERS:
        for budget in (5, 50, 157):
            with Solver(name=name, bootstrap_with=clauses) as raw:
                raw.conf_budget(budget)
                answer = raw.solve_limited()
                conflicts = int(raw.accum_stats()["conflicts"])
            if name not in OVERSHOOTING_SOLVERS:
                assert answer is None or conflicts <= budget, (name, budget, conflicts)
    task = task_for(tmp_path, "r200.cnf", text, 50)
    for ev in evaluators():
        glucose = ev.check(AgentState(task), Action("solver: glucose4\nbudget: 50"))
        assert glucose.status == "budget" and not glucose.solved and "past its budget of 50" in glucose.reason
        assert glucose.details["conflicts"] > 50 and glucose.details["verdict"] == "unknown"
        minisat = ev.check(AgentState(task), Action("solver: minisat22\nbudget: 50"))
        assert minisat.status == "budget" and minisat.reason == "minisat22 gave no answer within 50 conflicts"


def test_a_special_or_swapped_file_is_never_read_here(tmp_path: Path) -> None:
    """The bound reads the task's file in this process: a FIFO (which would block an open) or a
    symlink to a file over the size cap must send the check to the worker, without blocking."""
    import dataclasses
    import os

    task = task_for(tmp_path, "php.cnf", PHP_CNF, 50)
    fifo = tmp_path / "pipe.cnf"
    os.mkfifo(fifo)
    big = tmp_path / "big.cnf"
    big.write_text("c " + "x" * MAX_FILE_BYTES + "\n" + PHP_CNF)
    link = tmp_path / "link.cnf"
    link.symlink_to(big)
    for path in (fifo, link):
        moved = dataclasses.replace(task, meta={**task.meta, "path": str(path)})
        assert not bounded_solver_check(moved, "solver: minisat22\nbudget: 10")
