"""CodeHumanEval: check() conversion, bug families, conditions, and (data) the loader's tasks
judged by the real sandboxed evaluator."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.humaneval.checks import convert_check
from cm_gym.domains.humaneval.domain import HumanEvalDomain, distil_fix
from cm_gym.domains.humaneval.families import all_mutations, between, kind_family, shape_features
from cm_gym.domains.humaneval.loader import HumanEvalLayoutError, load_humaneval_tasks
from cm_gym.evaluators.testrun import decode

CHECK = """
METADATA = {}

def check(candidate):
    assert candidate([1, 2], 3) == [3, 4]
    assert candidate(2 ** 3, 1) is True
    assert not candidate([], 0)
    assert candidate("a", 1)
    assert abs(candidate(1.5, 0) - 0.5) < 1e-6
    assert tuple(candidate([3], 1)) == tuple([1, 3])
    assert True
    assert candidate(helper(1), 2) == 3
    for x in range(3):
        assert candidate(x, x) == x
"""


def test_convert_check_shapes_and_unconvertible() -> None:
    conv = convert_check(CHECK, "f")
    exprs = [(c.expr, c.input) for c in conv.cases]
    assert exprs == [
        ("f(*input_data)", [[1, 2], 3]),
        ("f(*input_data) is True", [8, 1]),
        ("bool(f(*input_data))", [[], 0]),
        ("bool(f(*input_data))", ["a", 1]),
        ("f(*input_data)", [1.5, 0]),
        ("tuple(f(*input_data))", [[3], 1]),
    ]
    assert decode(conv.cases[0].expected) == [3, 4]
    assert decode(conv.cases[2].expected) is False
    assert conv.cases[4].expected == {"approx": 0.5, "abs": 1e-6, "rel": None}
    assert conv.vacuous == 1
    reasons = [why for _, why in conv.unconvertible]
    assert reasons == ["refers to helper", "a For statement"]


def test_convert_check_bad_source_is_reported() -> None:
    assert convert_check("def check(:", "f").unconvertible[0][1].startswith("does not parse")
    assert convert_check("x = 1", "f").unconvertible == [("<test>", "no check(candidate) function")]


PROG = '''def f(xs, k):
    """Return the largest values in descending order, strictly greater than k."""
    total = 0
    out = sorted([x for x in xs if x > k], reverse=True)
    for i in range(len(out)):
        total += out[i]
    return max(out[:k]) if out else total
'''


def test_family_mutations_round_trip() -> None:
    muts = all_mutations(PROG)
    kinds = {m.kind for m in muts}
    assert {"swap_function", "toggle_reverse", "change_value", "flip_comparison", "plus_one"} <= kinds
    for m in muts:
        if m.kind in ("swap_function", "toggle_reverse", "change_value"):
            moved = m.apply(PROG)
            back = between(moved, PROG)
            assert back is not None and back.apply(moved) == PROG, m
    flip = next(m for m in muts if m.kind == "flip_comparison" and m.old == ">")
    assert kind_family(flip) == "boundary"
    feats = shape_features(PROG, "f", "largest values in descending order, strictly greater than k")
    assert feats["sorts"] and feats["mentions_order"] and feats["extreme_calls"] and feats["range_loop"]
    assert feats["boundary"] == "strict"


def _task(doc: str, program: str, task_id: str) -> Task:
    feats = shape_features(program, "f", doc)
    feats.update(function="f", docstring=doc, comparisons=["<", "<="])
    return Task(task_id=task_id, domain="humaneval", prompt=f"{doc}\n```python\n{program}```", env_id=task_id,
                reference="", features=feats, meta={"buggy": program})  # fmt: skip


def test_condition_excludes_lookalike_wording() -> None:
    fixed = "def f(xs, k):\n    return [x for x in xs if x < k]\n"
    buggy = fixed.replace("x < k", "x <= k")
    strict = _task("Return the values strictly less than k.", buggy, "a")
    inclusive = _task("Return the values that are at most k.", buggy, "b")
    d = distil_fix(strict, buggy, fixed)
    cond = parse_condition(d.condition, HumanEvalDomain().condition_predicates())
    assert cond.holds(strict)
    assert not cond.holds(inclusive)
    assert HumanEvalDomain().apply_contrast(inclusive, buggy, buggy, fixed) == fixed  # same code shape


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HumanEvalLayoutError, match="HumanEval.jsonl"):
        load_humaneval_tasks(root=tmp_path)
    (tmp_path / "HumanEval.jsonl").write_text('{"task_id": "x"}\n', encoding="utf-8")
    with pytest.raises(HumanEvalLayoutError, match="lacks"):
        load_humaneval_tasks(root=tmp_path)


def test_small_humaneval_folder_judged_in_sandbox(tmp_path: Path) -> None:
    """A two-problem folder in HumanEval's layout: bugs are injected, vetted, and the real
    evaluator judges the buggy program failing and the reference passing (cases and pytest mode)."""
    rows = [
        {"task_id": "T/0", "entry_point": "count_below",
         "prompt": 'def count_below(xs, k):\n    """Count values strictly less than k."""\n',
         "canonical_solution": "    n = 0\n    for i in range(len(xs)):\n        if xs[i] < k:\n            n += 1\n    return n\n",
         "test": "def check(candidate):\n    assert candidate([1, 2, 3], 2) == 1\n    assert candidate([5, 5], 5) == 0\n"
                 "    assert candidate([0, 1, 2, 3, 4], 9) == 5\n"},
        {"task_id": "T/1", "entry_point": "biggest",
         "prompt": 'def biggest(xs):\n    """Return the largest value."""\n',
         "canonical_solution": "    return max(xs)\n",
         "test": "def check(candidate):\n    for n in range(1, 4):\n        assert candidate(list(range(n))) == n - 1\n"},
    ]  # fmt: skip
    with gzip.open(tmp_path / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    report = LoadReport()
    tasks = load_humaneval_tasks(root=tmp_path, report=report)
    assert {t.meta["problem"] for t in tasks} == {"T/0", "T/1"}
    assert any("pytest mode" in why for _, why in report.notes)
    modes = {t.meta["problem"]: t.features["test_mode"] for t in tasks}
    assert modes == {"T/0": "cases", "T/1": "pytest"}
    domain = HumanEvalDomain()
    ev = domain.make_evaluator()
    try:
        for problem in ("T/0", "T/1"):
            task = next(t for t in tasks if t.meta["problem"] == problem)
            bad = ev.check(AgentState(task=task), Action(text=task.meta["buggy"]))
            good = ev.check(AgentState(task=task), Action(text=task.reference))
            assert not bad.solved and good.solved, (task.task_id, bad.feedback, good.feedback)
    finally:
        ev.close()


@pytest.mark.data
def test_real_humaneval_loads_with_families() -> None:
    report = LoadReport()
    tasks = load_humaneval_tasks(report=report)
    problems = {t.meta["problem"] for t in tasks}
    assert len(problems) >= 150
    families = {t.family for t in tasks}
    assert {"boundary", "off_by_one", "operator", "variable", "value", "function_misuse"} <= families
    for t in tasks:
        assert t.meta["buggy"] != t.reference and "candidate" not in t.prompt
        assert t.features["n_tests"] >= 1
