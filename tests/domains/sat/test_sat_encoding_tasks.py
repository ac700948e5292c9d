"""Generated SAT encoding tasks and their world model: references solve, slips lower U,
the UNSAT verdict, bad actions become scored Outcomes, determinism."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.sat.domain import SatDomain
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.generated import generate_encoding_tasks, make_encoding_task
from cm_gym.domains.sat.problems import family


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return generate_encoding_tasks(0)


@pytest.fixture(scope="module")
def ev() -> SatEvaluator:
    return SatEvaluator()


def check(ev: SatEvaluator, task: Task, text: str) -> Outcome:
    return ev.check(AgentState(task), Action(text))


def by_family(tasks: list[Task]) -> dict[str, list[Task]]:
    out: dict[str, list[Task]] = collections.defaultdict(list)
    for t in tasks:
        out[t.family].append(t)
    return out


def test_generation_is_deterministic_sized_and_has_look_alikes(tasks: list[Task]) -> None:
    assert len(tasks) >= 300 and len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.task_id.startswith("satgen-") and t.domain == "sat" for t in tasks)
    again = generate_encoding_tasks(0)
    assert [(t.task_id, t.prompt, t.reference) for t in again] == [
        (t.task_id, t.prompt, t.reference) for t in tasks
    ]
    other = generate_encoding_tasks(1)
    assert [t.prompt for t in other] != [t.prompt for t in tasks]
    fams = by_family(tasks)
    assert set(fams) == {"coloring", "multicoloring", "pigeonhole", "queens", "partial_queens", "scheduling"}
    php = fams["pigeonhole"]
    assert {t.meta["expected"] for t in php} == {"sat", "unsat"}
    assert {t.features["capacity"] for t in php} == {1, 2}
    assert {t.features["strict"] for t in fams["scheduling"]} == {True, False}
    for t in tasks:  # features are public: no verdict, JSON-serialisable values only
        assert "expected" not in t.features and "satisfiable" not in t.features
        assert all(isinstance(v, (str, int, float, bool)) for v in t.features.values())


@pytest.mark.parametrize(
    "fam", ["coloring", "multicoloring", "pigeonhole", "queens", "partial_queens", "scheduling"]
)
def test_references_of_every_family_solve(tasks: list[Task], ev: SatEvaluator, fam: str) -> None:
    sample = by_family(tasks)[fam][::4]
    for t in sample:
        o = check(ev, t, t.reference)
        assert o.solved and o.score == 1.0 and o.status == "ok", (t.task_id, o.feedback)
        assert o.details["verdict"] == t.meta["expected"]


@pytest.mark.slow
def test_every_reference_solves(tasks: list[Task], ev: SatEvaluator) -> None:
    bad = [t.task_id for t in tasks if not check(ev, t, t.reference).solved]
    assert bad == []


def test_unsat_pigeonhole_needs_the_unsat_verdict(ev: SatEvaluator) -> None:
    task = make_encoding_task("t-php", "pigeonhole", {"pigeons": 5, "holes": 4, "capacity": 1})
    assert task.meta["expected"] == "unsat"
    right = check(ev, task, task.reference)
    assert right.solved and right.details["verdict"] == "unsat"
    # forgetting the hole capacity makes it SAT: the decoded seating violates the problem
    wrong = check(ev, task, "exactly_one sit[i][*] for i in P")
    assert not wrong.solved and 0 < wrong.score < 1 and wrong.details["verdict"] == "sat"
    assert "hole" in wrong.feedback


def test_sat_problem_with_unsat_encoding_scores_zero(ev: SatEvaluator) -> None:
    task = make_encoding_task("t-php2", "pigeonhole", {"pigeons": 4, "holes": 4, "capacity": 1})
    o = check(
        ev,
        task,
        "exactly_one sit[i][*] for i in P\nat_most_one sit[*][h] for h in H\nclause -sit[0][h] for h in H",
    )
    assert o.score == 0 and not o.solved and "UNSAT" in o.feedback


def test_checker_is_independent_of_the_encoding() -> None:
    params = {"n": 3, "k": 2, "per_vertex": 1, "edges": [[0, 1], [1, 2]], "satisfiable": True}
    spec = family("coloring")
    good = {"color": frozenset({(0, 0), (1, 1), (2, 0)})}
    bad = {"color": frozenset({(0, 0), (1, 0), (2, 0), (2, 1)})}
    assert all(ok for _, ok in spec.check(params, good))
    results = dict(spec.check(params, bad))
    assert sum(not ok for ok in results.values()) == 3  # vertex 2 two colours; both edges clash


def test_every_error_operator_lowers_u_somewhere(tasks: list[Task], ev: SatEvaluator) -> None:
    model = SatDomain().error_model()
    fams = by_family(tasks)
    harmed: dict[str, int] = collections.Counter()
    for op in model.operators:
        for t in (t for ts in fams.values() for t in ts[::6]):
            if op.probability(t) <= 0:
                continue
            slipped = op.apply(t, t.reference, np.random.default_rng(0))
            if slipped is None:
                continue
            o = check(ev, t, slipped)
            assert o.score <= 1.0
            harmed[op.name] += int(not o.solved and o.score < 1)
    for name in (
        "missing_at_most_one",
        "missing_at_least_one",
        "wrong_colour",
        "off_by_one",
        "full_board_rows",
        "capacity_ignored",
    ):
        assert harmed[name] > 0, name


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("exactly_one color[v][* for v in V", "error"),
        ("solver: minisat22\nbudget: 10", "error"),
        ("\n".join(["at_least_one color[v][*] for v in V"] * 41), "error"),
        ("x" * 30_000, "refused"),
        ("not_both color[u][c] color[v][d] for (u, v) in E, c in C, d in 0..99999, e in 0..99999", "refused"),
    ],
)
def test_bad_actions_are_scored_outcomes(tasks: list[Task], ev: SatEvaluator, text: str, status: str) -> None:
    task = by_family(tasks)["coloring"][0]
    o = check(ev, task, text)
    assert (o.score, o.solved, o.status) == (0.0, False, status) and o.reason


def test_same_action_same_outcome(tasks: list[Task]) -> None:
    task = by_family(tasks)["scheduling"][3]
    slipped = task.reference.replace("where s <= t", "where s < t")
    a = [SatEvaluator().check(AgentState(task), Action(slipped)) for _ in range(3)]
    assert len({(o.score, o.feedback, o.status, tuple(sorted(o.details.items()))) for o in a}) == 1


def test_check_does_not_mutate_the_state(tasks: list[Task], ev: SatEvaluator) -> None:
    state = AgentState(tasks[0])
    before = (state.attempts, dict(state.task.meta["problem"]["params"]))
    ev.check(state, Action(tasks[0].reference))
    assert (state.attempts, dict(state.task.meta["problem"]["params"])) == before


def test_evaluator_settings_are_validated() -> None:
    from cm_gym.domains.sat.errors import SolverConfigError

    with pytest.raises(SolverConfigError):
        SatEvaluator(encoding_solver="lingeling")
    with pytest.raises(SolverConfigError):
        SatEvaluator(conflict_budget=0)
    task = make_encoding_task("t-tiny", "pigeonhole", {"pigeons": 7, "holes": 6, "capacity": 1})
    o = SatEvaluator(conflict_budget=5).check(AgentState(task), Action(task.reference))
    assert (o.solved, o.status) == (False, "budget")  # PHP(7, 6) needs more than 5 conflicts
