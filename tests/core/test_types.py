from __future__ import annotations

import dataclasses

import pytest

from cm_gym.core.types import (
    TRUNCATION,
    AgentState,
    Attempt,
    Outcome,
    Split,
    SplitOverlapError,
    Task,
    truncate,
)


def _task(i: int = 0) -> Task:
    return Task(
        task_id=f"t{i}",
        domain="toy",
        prompt="How many people are at least 18?",
        env_id="db",
        reference="SELECT 1",
    )


def test_state_is_immutable_and_fork_cannot_be_mutated() -> None:
    state = AgentState(task=_task())
    fork = state.fork()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fork.attempts = ()  # type: ignore[misc]
    later = state.with_attempt(
        Attempt(action="SELECT 2", outcome=Outcome(score=0.0, solved=False, feedback="wrong"))
    )
    assert state.attempts == () and later.decision == 1 and state.decision == 0
    assert later.last_score == 0.0 and not later.solved


def test_render_shows_feedback_never_reference_and_is_truncated() -> None:
    task = dataclasses.replace(_task(), reference="SELECT secret_reference_marker", context="x" * 10_000)
    state = AgentState(task=task).with_attempt(
        Attempt(action="SELECT 3", outcome=Outcome(score=0.0, solved=False, feedback="row count differs"))
    )
    text = state.render()
    assert "row count differs" in text and "secret_reference_marker" not in text
    assert len(text) <= TRUNCATION["state"]


def test_truncate_marks_cut() -> None:
    assert truncate("abcdef", 10) == "abcdef"
    assert truncate("abcdefghijkl", 8) == "abcde..."


def test_split_overlap_is_refused_with_ids() -> None:
    with pytest.raises(SplitOverlapError, match="t3"):
        Split(build=("t1", "t3"), train=("t2",), validation=("t2",), eval=("t3", "t4")).check()
    with pytest.raises(SplitOverlapError, match="validation"):
        Split(build=("t1",), train=("t2",), validation=("t9",), eval=("t4",)).check()
    Split(build=("t1",), train=("t1", "t2"), validation=("t2",), eval=("t4",)).check()


def test_check_all_uses_check_many_when_offered_and_refuses_a_short_answer() -> None:
    from cm_gym.core.types import Action, CmGymError, check_all

    class One:
        def check(self, state: AgentState, action: Action) -> Outcome:
            return Outcome(float(len(action.text)), False)

    class Many(One):
        batches = 0

        def check_many(self, state: AgentState, actions: list[Action]) -> list[Outcome]:
            Many.batches += 1
            return [self.check(state, a) for a in actions][: 1 if state.task.task_id == "t9" else None]

    acts = [Action("a"), Action("bb")]
    assert [o.score for o in check_all(One(), AgentState(_task()), acts)] == [1.0, 2.0]
    assert [o.score for o in check_all(Many(), AgentState(_task()), acts)] == [1.0, 2.0] and Many.batches == 1
    with pytest.raises(CmGymError, match="returned 1 outcomes for 2"):
        check_all(Many(), AgentState(_task(9)), acts)


def test_task_digest_takes_dict_keys_of_mixed_types() -> None:
    """A test input such as HumanEval/95's ``{"p": 1, 5: "b"}`` in a task's meta: one digest, no
    crash, and it tells ``5`` from ``"5"``; a task without such keys keeps its former digest."""
    import hashlib
    import json
    from dataclasses import asdict

    from cm_gym.core.types import task_digest

    mixed = Task("t1", "d", "p", "e", "r", meta={"input": {"p": 1, 5: "b"}})
    as_str = Task("t1", "d", "p", "e", "r", meta={"input": {"p": 1, "5": "b"}})
    assert task_digest([mixed]) == task_digest([mixed]) != task_digest([as_str])
    plain = _task()
    blob = json.dumps(asdict(plain), sort_keys=True, default=str, ensure_ascii=False).encode() + b"\n"
    assert task_digest([plain]) == hashlib.sha256(blob).hexdigest()
