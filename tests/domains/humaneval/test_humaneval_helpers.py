"""HumanEval tests call the task's own helpers, never the program's (issue 27): every pytest-mode
suite imports only the entry point from the program and every other function from a frozen copy
of the reference; on the four problems whose prompts define helpers (10, 32, 38, 50), programs
that redefine the helpers (the class of the attack, several spellings) fail, the reference passes.
Reads HumanEval from CM_GYM_DATA (nothing of it is committed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.base import LoadReport
from cm_gym.domains.humaneval.domain import HumanEvalDomain
from cm_gym.domains.humaneval.inject import InjectedBug
from cm_gym.domains.humaneval.loader import REFERENCE_MODULE, _suite, _task, humaneval_file, read_problems

pytestmark = pytest.mark.data
_WRAPPERS = ("bool", "tuple", "list", "sorted", "set")
HELPER_PROBLEMS = ("HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/50")


@pytest.fixture(scope="module")
def rows(shared_data: Path) -> list[dict]:
    return read_problems(humaneval_file(shared_data / "humaneval"))


def _top_level(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def test_every_pytest_suite_binds_only_the_entry_point_from_the_program(rows: list[dict]) -> None:
    with_helpers, cases_mode = set(), set()
    for row in rows:
        suite = _suite(row, LoadReport())
        if suite.mode != "pytest":  # cases: each test only evaluates the entry point on its input
            for case in suite.cases:
                names = {n.id for n in ast.walk(ast.parse(case.expr)) if isinstance(n, ast.Name)}
                assert names <= {row["entry_point"], "input_data", *_WRAPPERS}, (row["task_id"], case.expr)
            cases_mode.add(row["task_id"])
            continue
        test = ast.parse(suite.files["test_humaneval.py"])
        imports = {(n.module, a.name) for n in test.body if isinstance(n, ast.ImportFrom) for a in n.names}
        from_program = {name for module, name in imports if module == "solution"}
        assert from_program == {row["entry_point"]}, row["task_id"]
        helpers = _top_level(row["prompt"] + row["canonical_solution"]) - {row["entry_point"]}
        assert {name for module, name in imports if module == REFERENCE_MODULE} == helpers, row["task_id"]
        if helpers:
            with_helpers.add(row["task_id"])
            assert suite.files[f"{REFERENCE_MODULE}.py"] == row["prompt"] + row["canonical_solution"]
    # every problem whose prompt defines a helper (found among the 164) is judged one of these ways
    prompt_helpers = {r["task_id"] for r in rows if len(_top_level(r["prompt"])) > 1}
    assert prompt_helpers == set(HELPER_PROBLEMS) and prompt_helpers <= with_helpers | cases_mode
    assert {"HumanEval/32", "HumanEval/38", "HumanEval/50"} <= with_helpers  # their tests call helpers


# Programs that redefine what the tests call; each must fail its task (module doc).
_REDEFINE = {
    "HumanEval/32": [
        "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 0.0\n",
        "import math\npoly = lambda xs, x: 0\ndef find_zero(xs):\n    return 1.0\n",
        "def find_zero(xs):\n    global poly\n    poly = lambda *a: 0\n    return 0.0\n",
    ],
    "HumanEval/38": [
        "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
        "class encode_cyclic(str):\n    pass\n\ndef decode_cyclic(s):\n    return s\n",
    ],
    "HumanEval/50": [
        "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
        "import builtins\nbuiltins.encode_shift = lambda s: s\ndef decode_shift(s):\n    return s\n",
    ],
    "HumanEval/10": [
        "def is_palindrome(s):\n    return True\n\ndef make_palindrome(string):\n    return string\n",
    ],
}


def test_programs_that_redefine_the_helpers_fail(rows: list[dict]) -> None:
    # every helper problem as the loader judges it (a task of /38 may have no injected bug: the
    # suite is the same, built by the loader's own code)
    chosen = {r["task_id"]: r for r in rows if r["task_id"] in HELPER_PROBLEMS}
    tasks = {
        p: _task(r, _suite(r, LoadReport()), InjectedBug("value", r["prompt"], "probe"))
        for p, r in chosen.items()
    }
    ev = HumanEvalDomain().make_evaluator()
    try:
        for problem, programs in _REDEFINE.items():
            task = tasks[problem]
            assert task.features["test_mode"] == ("cases" if problem == "HumanEval/10" else "pytest")
            good = ev.check(AgentState(task=task), Action(text=task.reference))
            assert good.solved, (problem, good.feedback)
            for program in programs:
                o = ev.check(AgentState(task=task), Action(text=program))
                assert not o.solved and o.score < 1.0, (problem, program, o.feedback)
    finally:
        ev.close()
