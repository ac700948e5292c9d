"""The generated code-repair benchmark: size, determinism, look-alikes, and (through the sandboxed
world model) that every reference passes and every seeded bug fails."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.code.evaluator import DEFAULT_LIMITS, CodeEvaluator
from cm_gym.domains.code.generated import DATA_FILE, _load, load_generated_tasks, parse_templates
from cm_gym.evaluators.testrun import TestSuite, decode


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_generated_tasks()


@pytest.fixture(scope="module")
def evaluator() -> CodeEvaluator:
    return CodeEvaluator()


def test_at_least_150_tasks_with_unique_prefixed_ids(tasks: list[Task]) -> None:
    assert len(tasks) >= 150
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.task_id.startswith("codegen-") and t.domain == "code" for t in tasks)


def test_loading_is_deterministic(tasks: list[Task]) -> None:
    _load.cache_clear()
    again = load_generated_tasks()
    assert [(t.task_id, t.prompt, t.reference, dict(t.meta)) for t in again] == [
        (t.task_id, t.prompt, t.reference, dict(t.meta)) for t in tasks
    ]


def test_every_task_shows_a_buggy_program_different_from_the_reference(tasks: list[Task]) -> None:
    for t in tasks:
        assert t.meta["buggy"] != t.reference
        assert t.meta["buggy"] in t.prompt and t.reference not in t.prompt


def test_seeded_bug_classes_cover_the_issue_list(tasks: list[Task]) -> None:
    classes = {t.features["bug_class"] for t in tasks}
    assert {
        "off_by_one",
        "flipped_comparison",
        "wrong_variable",
        "missing_base_case",
        "swapped_arguments",
    } <= classes


def test_lookalike_pairs_differ_in_one_comparison(tasks: list[Task]) -> None:
    templates = {t.meta["template"]: t for t in tasks}
    below, at_most = templates["count_below"], templates["count_at_most"]
    assert below.features["lookalike"] == "count_at_most" and at_most.features["lookalike"] == "count_below"
    assert below.reference.replace("count_below", "X").replace(
        "x < t", "x <= t"
    ) == at_most.reference.replace("count_at_most", "X")
    assert below.features["boundary"] == "strict" and at_most.features["boundary"] == "inclusive"


def test_expected_outputs_never_enter_the_sandbox(tasks: list[Task]) -> None:
    """The reference program, extended to search every file it can see (its whole copy) for the
    expected outputs: found nowhere, so it still solves the task."""
    task = next(t for t in tasks if t.meta["template"] == "histogram")
    suite = TestSuite.from_dict(task.meta["suite"])
    needles = [json.dumps(c.expected) for c in suite.cases] + [repr(decode(c.expected)) for c in suite.cases]
    needles = [n for n in needles if len(n) >= 10]  # distinctive ones ("{}" is in any Python file)
    assert len(needles) >= 4
    scan = (
        "\nimport os as _os\n_N = " + repr(needles) + "\n"
        "for _r, _d, _fs in _os.walk('.'):\n    for _f in _fs:\n        _p = _os.path.join(_r, _f)\n"
        "        if _p.endswith('solution.py'):\n            continue\n"
        "        _t = open(_p, errors='replace').read()\n"
        "        if any(n in _t for n in _N):\n            raise RuntimeError('expected output found in ' + _p)\n"
    )
    outcome = CodeEvaluator(limits=DEFAULT_LIMITS).check(AgentState(task), Action(task.reference + scan))
    assert outcome.solved, outcome.feedback


def test_data_file_parses_into_templates_with_tests_and_bugs() -> None:
    templates = parse_templates(DATA_FILE.read_text())
    assert len(templates) >= 40
    for tpl in templates:
        assert tpl.description and tpl.tests and tpl.bugs and f"def {tpl.name}(" in tpl.source


def _check_all(evaluator: CodeEvaluator, sample: list[Task]) -> None:
    checked: set[str] = set()
    for t in sample:
        state = AgentState(t)
        if t.meta["template"] not in checked:
            ref = evaluator.check(state, Action(t.reference))
            assert ref.solved and ref.score == 1.0, (t.task_id, ref.feedback)
            checked.add(t.meta["template"])
        bug = evaluator.check(state, Action(t.meta["buggy"]))
        assert bug.score < 1.0 and not bug.solved, (t.task_id, t.features["bug_class"])
        assert bug.feedback.startswith("FAILED test_") and len(bug.feedback) <= 800


def test_sample_reference_passes_and_bug_fails(tasks: list[Task], evaluator: CodeEvaluator) -> None:
    quick = [t for t in tasks if t.meta["template"] not in ("collatz_steps", "binary_search")]
    _check_all(evaluator, quick[::17])


@pytest.mark.slow
def test_all_references_pass_and_all_bugs_fail(tasks: list[Task], evaluator: CodeEvaluator) -> None:
    _check_all(evaluator, tasks)


def test_evaluator_leaves_the_state_alone(tasks: list[Task], evaluator: CodeEvaluator) -> None:
    state = AgentState(tasks[0])
    before = dataclasses.replace(state)
    evaluator.check(state, Action(tasks[0].reference))
    assert state == before and state.attempts == ()
