"""DIMACS loading and the solver-configuration world model, on small files written here and on
the shared SATLIB subsets (``@pytest.mark.data``)."""

from __future__ import annotations

import collections
import functools
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.sat.dimacs import parse_dimacs, read_dimacs
from cm_gym.domains.sat.errors import DimacsError
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.loader import FAMILIES, load_satlib_tasks
from cm_gym.domains.sat.solver import SolverConfig, parse_config

# (x1 or x2) and (not x1 or x2) and (x1 or not x2)  -> only x1 = x2 = true
SAT_CNF = "c tiny\nc second comment\np cnf 2 3\n1 2 0\n-1 2 0\n1 -2\n0\n%\n0\n"
# pigeonhole 3 pigeons into 2 holes: UNSAT
PHP_CNF = "p cnf 6 9\n1 2 0\n3 4 0\n5 6 0\n-1 -3 0\n-1 -5 0\n-3 -5 0\n-2 -4 0\n-2 -6 0\n-4 -6 0\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def solver_task(folder: Path, name: str, text: str, fam: str = "tiny") -> Task:
    write(folder / fam, name, text) if (folder / fam).is_dir() else write(_mkdir(folder / fam), name, text)
    return next(t for t in load_satlib_tasks(root=folder) if t.meta["path"].endswith(name))


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def evaluator() -> SatEvaluator:
    """One evaluator (one checking worker) for the module's checks."""
    return SatEvaluator()


def check(task: Task, text: str) -> Outcome:
    return evaluator().check(AgentState(task), Action(text))


def test_parse_accepts_comments_multiline_clauses_and_percent_trailer() -> None:
    cnf = parse_dimacs(SAT_CNF, "tiny.cnf")
    assert cnf.n_vars == 2 and cnf.clauses() == [[1, 2], [-1, 2], [1, -2]]
    assert cnf.comments == ("tiny", "second comment") and cnf.max_width == 2


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "no 'p cnf' header"),
        ("1 2 0\np cnf 2 1\n", "line 1: clause before"),
        ("p cnf 2 1\n1 3 0\n", "literal 3 exceeds"),
        ("p cnf 2 2\n1 2 0\n", "declares 2 clauses but the file has 1"),
        ("p cnf 2 1\n1 two 0\n", "not a clause line"),
        ("p cnf x 1\n1 0\n", "malformed header"),
        ("p cnf 1 1\np cnf 1 1\n1 0\n", "second 'p' header"),
    ],
)
def test_malformed_dimacs_is_one_error_naming_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, "broken.cnf", text)
    with pytest.raises(DimacsError) as info:
        read_dimacs(path)
    assert str(path) in str(info.value) and fragment in str(info.value)


def test_directory_loader_names_the_bad_file(tmp_path: Path) -> None:
    write(tmp_path, "a.cnf", SAT_CNF)
    write(tmp_path, "b.cnf", "p cnf 1 1\n5 0\n")
    with pytest.raises(DimacsError, match="b.cnf"):
        load_satlib_tasks(root=tmp_path)
    with pytest.raises(DimacsError, match="cannot read"):
        read_dimacs(tmp_path / "missing.cnf")


def test_verified_model_and_unsat_answers_score_one(tmp_path: Path) -> None:
    sat = solver_task(tmp_path, "sat.cnf", SAT_CNF)
    o = check(sat, "solver: minisat22\nbudget: 10")
    assert o.solved and o.details["verdict"] == "sat"
    unsat = solver_task(tmp_path, "php.cnf", PHP_CNF)
    assert unsat.features["max_budget"] == 10  # an undeclared family: calibrated (floor 10)
    o = check(unsat, "solver: glucose4\nphase: true\npreprocess: on\nbudget: 10")
    assert o.solved and o.details["verdict"] == "unsat"


@pytest.mark.parametrize(
    ("config", "status", "fragment"),
    [
        ("solver: minisat22\nbudget: 11", "refused", "allowance"),
        ("solver: lingeling\nbudget: 10", "refused", "no deterministic conflict budget"),
        ("solver: z3\nbudget: 10", "error", "unknown solver"),
        ("solver: minisat22\nbudget: -3", "error", "positive"),
        ("solver: minisat22\ncolour: red\nbudget: 3", "error", "unknown key"),
        ("solver: minisat22", "error", "needs at least"),
        ("phase: sideways\nsolver: minisat22\nbudget: 3", "error", "phase must be"),
        ("exactly_one x[*]", "error", "key: value"),
    ],
)
def test_bad_configurations_are_scored(tmp_path: Path, config: str, status: str, fragment: str) -> None:
    task = solver_task(tmp_path, "sat.cnf", SAT_CNF)
    o = check(task, config)
    assert (o.score, o.solved, o.status) == (0.0, False, status) and fragment in o.reason


def test_budget_exhaustion_is_a_budget_outcome(shared_data: Path) -> None:
    task = load_satlib_tasks(families=["uuf50-218"], limit=1)[0]
    o = check(task, "solver: maplechrono\nbudget: 5")
    assert (o.solved, o.status) == (False, "budget") and "5 conflicts" in o.reason


def test_config_round_trip() -> None:
    cfg = SolverConfig("glucose4", "false", True, 77)
    assert parse_config(cfg.render()) == cfg


def test_solver_outcomes_replay_exactly(shared_data: Path) -> None:
    task = load_satlib_tasks(families=["uf50-218"], limit=3)[2]
    action = "solver: cadical153\nphase: true\nbudget: 40"
    outs = [check(task, action) for _ in range(3)]
    assert len({(o.solved, o.status, o.details["conflicts"]) for o in outs}) == 1


@pytest.mark.data
def test_satlib_loader_reads_every_family(shared_data: Path) -> None:
    tasks = load_satlib_tasks()
    counts = collections.Counter(t.family for t in tasks)
    assert counts == {
        "uf20-91": 1000,
        "uf50-218": 1000,
        "uuf50-218": 1000,
        "flat30-60": 100,
        "flat100-239": 100,
    }
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.features["max_budget"] == FAMILIES[t.family].allowance for t in tasks)
    some = load_satlib_tasks(families=["flat30-60"], limit=7)
    assert [t.family for t in some] == ["flat30-60"] * 7 and some[0].features["n_vars"] == 90


@pytest.mark.data
def test_reference_configs_reproduce_the_labels_on_a_sample(shared_data: Path) -> None:
    ev = evaluator()
    verdicts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    tasks = load_satlib_tasks(families=["uf20-91"]) + load_satlib_tasks(
        families=["uuf50-218", "uf50-218", "flat100-239"], limit=60
    )
    for t in tasks:
        o = ev.check(AgentState(t), Action(t.reference))
        assert o.solved, (t.task_id, o.feedback)
        verdicts[t.family][o.details["verdict"]] += 1
    assert verdicts["uf20-91"] == {"sat": 1000}
    assert verdicts["uuf50-218"] == {"unsat": 60}
    assert verdicts["uf50-218"] == {"sat": 60} and verdicts["flat100-239"] == {"sat": 60}


@pytest.mark.data
def test_choices_matter_on_unsat_instances(shared_data: Path) -> None:
    """A weak solver or a budget copied from the satisfiable family fails many uuf50 proofs."""
    tasks = load_satlib_tasks(families=["uuf50-218"], limit=40)
    ev = evaluator()
    weak = sum(ev.check(AgentState(t), Action("solver: maplechrono\nbudget: 150")).solved for t in tasks)
    low = sum(ev.check(AgentState(t), Action("solver: maplecm\nbudget: 50")).solved for t in tasks)
    strong = sum(ev.check(AgentState(t), Action(t.reference)).solved for t in tasks)
    assert strong == 40 and weak < 10 and low < 30


def test_configurations_are_parsed_once_and_bad_ones_always_refused() -> None:
    """`parse_config` is cached (a check of a folder parses the same text thousands of times):
    the same text gives the same config object; a malformed one raises on every call."""
    from cm_gym.domains.sat.errors import SolverConfigError, SolverRefused

    text = "solver: minisat22\nbudget: 77"
    assert parse_config(text) is parse_config(text) == SolverConfig("minisat22", "default", False, 77)
    for _ in range(2):
        with pytest.raises(SolverConfigError):
            parse_config("solver: minisat22")
        with pytest.raises(SolverRefused):
            parse_config("solver: lingeling\nbudget: 5")
