"""Dafny's verdict cache and parallel checks (needs `dafny`): a weak-bound draft fails and its
first repair verifies; verdicts persist by program hash across evaluators; `check_many` agrees
with `check`; a corrupt cache file is left alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.dafny.evaluator import DafnyEvaluator
from cm_gym.domains.dafny.slips import weak_bound
from cm_gym.evaluators.sandbox import ToolNotFoundError
from tests.domains.dafny.conftest import by_file

pytestmark = [pytest.mark.dafny, pytest.mark.data]


def evaluator(path: Path | None) -> DafnyEvaluator:
    try:
        return DafnyEvaluator(cache=path, workers=2)
    except ToolNotFoundError as exc:
        pytest.skip(f"dafny is not installed: {exc}")


def test_weak_bound_fails_its_repair_verifies_and_verdicts_are_cached(
    tmp_path: Path, dafny_tasks: list[Task]
) -> None:
    task = by_file(dafny_tasks, "Clover_array_append")
    draft = weak_bound(task, task.reference, np.random.default_rng(0))
    assert draft is not None
    repair = DafnyDomain().edit_operators(dataclasses.replace(task, reference=""), draft)[0].text
    state = AgentState(task)
    first = evaluator(tmp_path / "v.sqlite")
    slipped, fixed = first.check_many(state, [Action(draft), Action(repair)])
    assert first.runs == 2 and not slipped.solved and slipped.status == "ok" and fixed.solved
    assert "invariant" in slipped.feedback or "not verified" in slipped.feedback
    first.close()
    again = evaluator(tmp_path / "v.sqlite")  # a new process would see the same file
    hits = again.check_many(state, [Action(draft), Action(repair)])
    assert again.runs == 0 and [(o.score, o.solved, o.feedback) for o in hits] == [
        (o.score, o.solved, o.feedback) for o in (slipped, fixed)
    ]
    assert all(o.details["cached"] for o in hits)
    # an invalid action never reaches the verifier and is not cached
    bad = again.check(state, Action(task.reference.replace("a.Length", "a.Length + 0", 1)))
    assert bad.status == "error" and again.runs == 0


def test_a_corrupt_cache_file_is_left_alone(tmp_path: Path, dafny_tasks: list[Task]) -> None:
    path = tmp_path / "v.sqlite"
    path.write_bytes(b"not a database" * 10)
    ev = evaluator(path)
    task = by_file(dafny_tasks, "Clover_abs")
    assert ev.check(AgentState(task), Action(task.meta["program"])).solved and ev.runs == 1
    assert path.read_bytes() == b"not a database" * 10
