"""Dafny's verdict cache and parallel checks (needs `dafny`): a weak-bound draft fails and its
first repair verifies; verdicts persist by program hash across evaluators; `check_many` agrees
with `check`; a corrupt cache file is left alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
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
    # the reference is verified once for the task's budget (issue 33); the repair restores it, so
    # its check is that verdict: two runs
    assert repair.strip() == task.reference.strip()
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


HARD = "lemma Hard(a: int, b: int, c: int)\n  requires a > 0 && b > 0 && c > 0\n  ensures a*a*a*a + b*b*b*b != c*c*c*c\n{}\n"


def test_the_cpu_backstop_bounds_a_grinding_prover_and_keys_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """z3 does not count every loop against the rlimit (nonlinear arithmetic): `cpu_s` stops it in
    CPU time; the verdict is cached under that limit, and a stop of the verifier itself at the
    backstop (status "budget") is cached as the program's own failure."""
    try:
        tight = DafnyEvaluator(cache=tmp_path / "v.sqlite", cpu_s=1)
    except ToolNotFoundError as exc:
        pytest.skip(f"dafny is not installed: {exc}")
    with pytest.raises(ValueError, match="cpu_s"):
        DafnyEvaluator(cache=None, cpu_s=0)
    assert tight.verifier.limits.cpu_s == 1
    task = Task(
        "d-hard", "dafny", "p", "dafny/hard", HARD, features={"members": ["Hard"]}, meta={"program": HARD}
    )
    stopped = tight.check(AgentState(task), Action(HARD))
    assert not stopped.solved and stopped.status in ("ok", "budget") and tight.runs == 1
    tight.close()
    again = DafnyEvaluator(cache=tmp_path / "v.sqlite", cpu_s=1)
    hit = again.check(AgentState(task), Action(HARD))
    assert again.runs == 0 and hit.details["cached"] and hit.status == stopped.status
    other = DafnyEvaluator(cache=tmp_path / "v.sqlite", cpu_s=2)  # another limit: another key
    assert other._key(HARD + "\n") != again._key(HARD + "\n")
    # the verifier process itself stopped at the backstop: cached as the program's failure
    budget = Outcome(0.0, False, feedback="cpu", status="budget", reason="cpu")
    monkeypatch.setattr(other, "_run", lambda text, n, b=None: budget)
    program = HARD.replace("{}", "{ }")
    assert other.check(AgentState(task), Action(program)).status == "budget"
    monkeypatch.setattr(
        other, "_run", lambda text, n, b=None: pytest.fail("the budget verdict was not cached")
    )
    assert other.check(AgentState(task), Action(program)).status == "budget"
