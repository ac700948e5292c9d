"""The SQL world model: Spider-style execution accuracy, feedback, caching, bad tasks."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.sql.evaluator import SQLEvaluator

TaskFactory = Callable[..., Task]


def check(task: Task, sql: str, **kw: Any) -> Outcome:
    return SQLEvaluator(**kw).check(AgentState(task), Action(sql))


def test_identical_and_reordered_columns_are_correct(make_task: TaskFactory) -> None:
    task = make_task("SELECT name, age FROM people WHERE age >= 18")
    assert check(task, "SELECT name, age FROM people WHERE age >= 18").solved
    assert check(task, "SELECT age, name FROM people WHERE 18 <= age").solved  # column order free


def test_row_order_ignored_without_order_by(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM people WHERE age >= 18")
    outcome = check(task, "SELECT name FROM people WHERE age >= 18 ORDER BY name DESC")
    assert outcome.solved and outcome.score == 1.0


def test_row_order_matters_with_order_by(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM people ORDER BY age DESC, name ASC")
    assert check(task, "SELECT name FROM people ORDER BY age DESC, name").solved
    wrong = check(task, "SELECT name FROM people ORDER BY age ASC, name ASC")
    assert not wrong.solved and wrong.status == "ok"
    assert "order" in wrong.feedback
    assert wrong.details["ordered"] is True


def test_order_by_only_in_subquery_is_unordered(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM (SELECT name FROM people ORDER BY age) WHERE name != 'Ann'")
    assert check(task, "SELECT name FROM people WHERE name <> 'Ann' ORDER BY name DESC").solved


def test_multisets_count_repeats(make_task: TaskFactory) -> None:
    task = make_task("SELECT city FROM people")
    outcome = check(task, "SELECT DISTINCT city FROM people")
    assert not outcome.solved
    assert "repeats" in outcome.feedback and "3 row(s)" in outcome.feedback
    assert check(
        make_task("SELECT DISTINCT city FROM people"), "SELECT city FROM people GROUP BY city"
    ).solved


def test_null_safe_comparison(make_task: TaskFactory) -> None:
    task = make_task("SELECT name, score FROM people")
    assert check(task, "SELECT name, score FROM people").solved
    assert not check(task, "SELECT name, IFNULL(score, 0) FROM people").solved  # NULL != 0
    assert check(
        make_task("SELECT boss_id FROM people WHERE id < 4"),
        "SELECT NULL UNION ALL SELECT 1 UNION ALL SELECT 1",
    ).solved


def test_numeric_tolerance_and_types(make_task: TaskFactory) -> None:
    task = make_task("SELECT AVG(score) FROM people")
    assert check(task, "SELECT SUM(score) / COUNT(score) FROM people").solved
    assert check(make_task("SELECT 0.3"), "SELECT 0.1 + 0.2").solved
    assert check(make_task("SELECT COUNT(*) FROM pets"), "SELECT 4.0").solved  # 4 == 4.0
    assert not check(make_task("SELECT COUNT(*) FROM pets"), "SELECT '4'").solved  # text is not a number
    assert not check(make_task("SELECT 0.3"), "SELECT 0.3001").solved


def test_two_empty_results_are_equal(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM people WHERE age > 100")
    assert check(task, "SELECT name, age FROM people WHERE age < 0").solved


def test_wrong_result_feedback_never_reveals_reference(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM people WHERE age >= 18 AND city = 'Oslo'")
    outcome = check(task, "SELECT name FROM people WHERE age > 18 AND city = 'Oslo'")
    assert not outcome.solved and outcome.score == 0.0
    assert len(outcome.feedback) <= 800
    assert task.reference not in outcome.feedback
    for value in ("Bob", "Fay", "Oslo", ">="):
        assert value not in outcome.feedback
    assert "1 row(s) x 1 column(s)" in outcome.feedback and "2 row(s)" in outcome.feedback


def test_partial_credit_mode(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM people WHERE age >= 18")
    partial = check(task, "SELECT name FROM people WHERE age > 18", partial_credit=True)
    assert not partial.solved and 0.0 < partial.score < 1.0
    assert partial.score == pytest.approx(3 / 5)  # overlap 3 of max(3, 5) rows
    assert check(task, "SELECT name FROM people WHERE age > 18").score == 0.0
    assert check(task, "SELECT name FROM people WHERE age >= 18", partial_credit=True).score == 1.0
    assert check(task, "SELECT name, age FROM people", partial_credit=True).score == 0.0  # wrong columns
    ordered = make_task("SELECT name FROM people ORDER BY age, name")
    assert check(ordered, "SELECT name FROM people ORDER BY age DESC, name", partial_credit=True).score == 0.5


def test_graded_overlap_travels_beside_the_binary_score(make_task: TaskFactory) -> None:
    """U stays execution accuracy; the overlap is graded evidence (Outcome.graded_score) that a
    record's estimated improvement uses, so Δ is not the same 1.0 for every SQL record."""
    from cm_gym.memory.record import Record

    task = make_task("SELECT name FROM people WHERE age >= 18")
    near = check(task, "SELECT name FROM people WHERE age > 18")
    far = check(task, "SELECT name FROM people WHERE age > 40")
    right = check(task, "SELECT name FROM people WHERE age >= 18")
    assert near.score == far.score == 0.0 and right.graded_score == 1.0
    assert near.graded_score == pytest.approx(3 / 5) and far.graded_score == pytest.approx(2 / 5)
    evidence = {"score_minus": 0.0, "score_plus": 1.0, "graded_minus": near.graded_score, "graded_plus": 1.0}
    rec = Record.create(
        domain="sql", source_task_id="t", env_id="db", situation="s", a_minus="a", a_plus="b",
        evidence=evidence, condition="", contrast_key="k", delta=1.0,
    )  # fmt: skip
    assert rec.delta == 1.0 and rec.improvement == pytest.approx(2 / 5)


def test_reference_result_is_computed_once(make_task: TaskFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    evaluator = SQLEvaluator()
    task = make_task("SELECT name FROM people WHERE age >= 18")
    calls: list[str] = []
    original = evaluator._run  # every query runs through it: the reference (via `run`) and candidates

    def counting(path: str, sql: str, immutable: bool = True):
        calls.append(sql)
        return original(path, sql, immutable)

    monkeypatch.setattr(evaluator, "_run", counting)
    for sql in ("SELECT name FROM people", "SELECT name FROM people WHERE age >= 18", "SELECT 1"):
        evaluator.check(AgentState(task), Action(sql))
    assert calls.count(task.reference) == 2  # once as the reference, once as the candidate
    assert len(calls) == 4


def test_bad_tasks_give_error_outcomes(make_task: TaskFactory, tmp_path: Path) -> None:
    missing = make_task("SELECT 1", db_path=tmp_path / "nope.sqlite")
    outcome = check(missing, "SELECT 1")
    # a task whose reference cannot run is "unevaluable" (the task, not the action, is broken)
    assert outcome.status == "unevaluable" and "not found" in outcome.reason and outcome.score == 0.0
    corrupt_path = tmp_path / "corrupt.sqlite"
    corrupt_path.write_bytes(b"this is not a database" * 100)
    corrupt = check(make_task("SELECT 1", db_path=corrupt_path), "SELECT 1")
    assert corrupt.status in ("error", "unevaluable") and corrupt.score == 0.0
    blank = check(make_task("   "), "SELECT 1")
    assert blank.status == "error" and "no reference" in blank.reason
    broken_ref = check(make_task("SELECT nope FROM people"), "SELECT 1")
    assert broken_ref.status == "unevaluable" and "reference" in broken_ref.reason
    no_db = SQLEvaluator().check(AgentState(Task("t", "sql", "q", "e", "SELECT 1")), Action("SELECT 1"))
    assert no_db.status == "error" and "no database" in no_db.reason


def test_bad_actions_are_scored_not_raised(make_task: TaskFactory) -> None:
    task = make_task("SELECT name FROM people")
    cases = {
        "": "error",
        "   ;  ": "error",
        "hello world": "error",
        "SELEC name FROM people": "error",
        "SELECT nope FROM people": "error",
        "SELECT name FROM people; SELECT 1": "error",
        "SELECT '\udcff'": "error",  # not encodable as UTF-8
        "SELECT 1\x00": "error",
        "DROP TABLE people": "refused",
    }
    for sql, status in cases.items():
        outcome = check(task, sql)
        assert outcome.status == status, (sql, outcome)
        assert outcome.score == 0.0 and not outcome.solved and outcome.reason
        assert len(outcome.feedback) <= 800
    assert check(task, "  SELECT name FROM people ;; ").solved  # trailing semicolons are fine
    assert "several statements" in check(task, "SELECT 1; SELECT 2").reason


def test_evaluator_pickles_after_use(make_task: TaskFactory) -> None:
    evaluator = SQLEvaluator(budget_s=1.5)
    task = make_task("SELECT name FROM people")
    assert evaluator.check(AgentState(task), Action("SELECT name FROM people")).solved
    clone = pickle.loads(pickle.dumps(evaluator))
    assert clone.budget_s == 1.5
    assert clone.check(AgentState(task), Action("SELECT name FROM people")).solved


@pytest.mark.parametrize(
    ("reference", "query"),
    [
        (
            "SELECT name, age FROM people WHERE age >= 18",
            "SELECT name, age FROM people WHERE age >= 18 ORDER BY name DESC",
        ),
        ("SELECT name, age FROM people WHERE age >= 18", "SELECT age, name FROM people WHERE age >= 18"),
        ("SELECT name, age FROM people", "SELECT age, name FROM people ORDER BY name DESC"),
    ],
)
def test_a_right_answer_in_another_order_has_the_scored_outcome(
    make_task: TaskFactory, reference: str, query: str
) -> None:
    """A right answer whose rows differ from the reference's only in order (rows, columns or both)
    gets the right answer's shared Outcome with its own steps: equal, field by field
    and key by key, to the one `scored` builds from the comparison."""
    from cm_gym.domains.sql.compare import compare
    from cm_gym.domains.sql.outcomes import scored
    from cm_gym.evaluators.budgets import SQLITE_STEPS, budget_details

    task = make_task(reference)
    evaluator = SQLEvaluator()
    got = evaluator.check(AgentState(task), Action(query))
    ref = evaluator.reference(task.meta["db_path"], reference, immutable=False)
    result, status, _ = evaluator.run(task.meta["db_path"], query, immutable=False)
    assert status == "ok" and result is not None and result.rows != ref.result.rows
    budget = budget_details(SQLITE_STEPS, evaluator.step_budget, evaluator.last_run["steps"])
    usual = scored(
        result, ref.result, ref.ordered, compare(result, ref.result, ordered=ref.ordered), False, budget
    )
    assert got.solved and got == usual and list(got.details.items()) == list(usual.details.items())
