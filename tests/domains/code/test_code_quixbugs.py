"""QuixBugs through our world model: the loader, and fixed → 1.0 / buggy < 1.0 (a sample fast,
all 40 programs slow). Reads the real data; the shared folder is never written."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.code.evaluator import CodeEvaluator
from cm_gym.domains.code.loader import load_quixbugs_tasks

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def tasks(shared_data: Path) -> list[Task]:
    return load_quixbugs_tasks(shared_data / "quixbugs")


@pytest.fixture(scope="module")
def evaluator() -> CodeEvaluator:
    return CodeEvaluator()


def _by_name(tasks: list[Task], name: str) -> Task:
    return next(t for t in tasks if t.task_id == f"quixbugs-{name}")


def test_forty_programs_and_all_upstream_tests(tasks: list[Task]) -> None:
    assert len(tasks) == 40
    assert sum(t.features["n_tests"] for t in tasks) == 276  # 278 upstream, minus its 2 slow skips
    modes = {t.features["test_mode"] for t in tasks}
    assert modes == {"cases", "pytest"}
    assert all(t.reference and "def " in t.meta["buggy"] and t.meta["buggy"] != t.reference for t in tasks)


def test_prompt_holds_description_and_buggy_program(tasks: list[Task]) -> None:
    t = _by_name(tasks, "bitcount")
    assert "number of 1-bits" in t.prompt and "n ^= n - 1" in t.prompt
    assert "n &= n - 1" not in t.prompt  # the fix is never shown
    assert t.features["bug_class"] == "wrong_operator"


def test_case_mode_reads_upstream_transforms_and_approx(tasks: list[Task]) -> None:
    hanoi = _by_name(tasks, "hanoi").meta["suite"]
    assert hanoi["mode"] == "cases" and hanoi["cases"][1]["expected"] == [{"tuple": [1, 3]}]
    sqrt = _by_name(tasks, "sqrt").meta["suite"]
    assert sqrt["cases"][0]["expected"]["approx"] == pytest.approx(1.4166666666666665)
    knapsack = _by_name(tasks, "knapsack").meta["suite"]
    assert all(c["input"][0] != 6404180 for c in knapsack["cases"])  # upstream's slow case is skipped


def _check(evaluator: CodeEvaluator, task: Task) -> None:
    state = AgentState(task)
    fixed = evaluator.check(state, Action(task.reference))
    assert fixed.score == 1.0 and fixed.solved, (task.task_id, fixed.feedback)
    buggy = evaluator.check(state, Action(task.meta["buggy"]))
    assert buggy.score < 1.0 and not buggy.solved, task.task_id
    assert buggy.feedback and len(buggy.feedback) <= 800


@pytest.mark.parametrize("name", ["gcd", "hanoi", "rpn_eval", "breadth_first_search", "reverse_linked_list"])
def test_sample_fixed_scores_one_and_buggy_below_one(
    tasks: list[Task], evaluator: CodeEvaluator, name: str
) -> None:
    _check(evaluator, _by_name(tasks, name))


def test_fixed_sqrt_passes_within_tolerance(tasks: list[Task], evaluator: CodeEvaluator) -> None:
    sqrt = _by_name(tasks, "sqrt")
    assert evaluator.check(AgentState(sqrt), Action(sqrt.reference)).solved
    off = sqrt.reference.replace("return approx", "return approx + 1.0")
    assert evaluator.check(AgentState(sqrt), Action(off)).score == 0.0


@pytest.mark.slow
@pytest.mark.timeout(1800)  # budgets are CPU seconds: verdicts do not move with load, wall time does
def test_all_fixed_score_one_and_all_buggy_below_one(tasks: list[Task], evaluator: CodeEvaluator) -> None:
    for task in tasks:
        _check(evaluator, task)


def test_the_shared_folder_is_untouched(
    shared_data: Path, tasks: list[Task], evaluator: CodeEvaluator
) -> None:
    root = shared_data / "quixbugs"
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    evaluator.check(
        AgentState(_by_name(tasks, "gcd")), Action("import shutil\nshutil.rmtree('/nonexistent', True)\n")
    )
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before
