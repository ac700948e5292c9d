"""The hot value types (Action, Outcome, Attempt, AgentState) set their fields in their own
``__init__`` (issue 35): each must build the very object the frozen dataclass's generated
``__init__`` builds, and stay a frozen dataclass in every other respect."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from cm_gym.core.types import Action, AgentState, Attempt, Outcome, Task

TASK = Task("t1", "sql", "How many?", "db", "SELECT 1", features={"k": 1})
OUTCOME = Outcome(0.5, False, "Wrong", details={"graded": 0.5})


def generated(cls: type) -> type:
    """A frozen dataclass with `cls`'s fields (defaults, factories, hash and compare flags): what
    ``@dataclass(frozen=True)`` would have generated for it."""
    specs = []
    for f in dataclasses.fields(cls):
        kw: dict[str, Any] = {"hash": f.hash, "compare": f.compare, "repr": f.repr}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kw["default_factory"] = f.default_factory
        specs.append((f.name, f.type, dataclasses.field(**kw)))
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True)


CALLS: list[tuple[type, tuple[Any, ...], dict[str, Any]]] = [
    (Action, ("SELECT 1",), {}),
    (Action, (), {"text": ""}),
    (Outcome, (1.0, True), {}),
    (Outcome, (0.0, False, "bad", "error", "why"), {}),
    (Outcome, (0.3, False), {"details": {"a": 1}, "reason": "r"}),
    (Outcome, (0.3, False), {"details": None}),
    (
        Outcome,
        (),
        {"score": 0.2, "solved": False, "feedback": "f", "status": "budget", "reason": "x", "details": {}},
    ),
    (Attempt, ("SELECT 1", OUTCOME), {}),
    (Attempt, ("SELECT 2", OUTCOME, "SELECT 1", "rec-7"), {}),
    (Attempt, (), {"action": "a", "outcome": OUTCOME, "record_id": None}),
    (AgentState, (TASK,), {}),
    (AgentState, (TASK, (Attempt("a", OUTCOME),), ("think",)), {}),
    (AgentState, (), {"task": TASK, "reflections": ("r",)}),
]


@pytest.mark.parametrize(("cls", "args", "kwargs"), CALLS)
def test_the_same_object_as_the_generated_init(
    cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    ours, theirs = cls(*args, **kwargs), generated(cls)(*args, **kwargs)
    assert list(vars(ours).items()) == list(vars(theirs).items())  # the same fields, in order
    assert repr(ours) == repr(theirs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert ours == cls(*args, **kwargs) and hash(ours) == hash(cls(*args, **kwargs))
    assert pickle.loads(pickle.dumps(ours)) == ours and copy.deepcopy(ours) == ours
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours.__setattr__(dataclasses.fields(cls)[0].name, None)
    first = dataclasses.fields(cls)[0].name
    changed = dataclasses.replace(ours, **{first: getattr(ours, first)})
    assert changed == ours and type(changed) is cls


@pytest.mark.parametrize("cls", [Action, Outcome, Attempt, AgentState])
def test_wrong_arguments_fail_as_they_would(cls: type) -> None:
    ref = generated(cls)
    for args, kwargs in (((), {}), ((1, 2, 3, 4, 5, 6, 7), {}), (("x",), {"nope": 1})):
        with pytest.raises(TypeError):
            ref(*args, **kwargs)
        with pytest.raises(TypeError):
            cls(*args, **kwargs)


def test_every_outcome_gets_its_own_details() -> None:
    a, b = Outcome(1.0, True), Outcome(1.0, True)
    assert a.details == {} and a.details is not b.details
    assert Outcome(1.0, True, details=None).details is None  # given: kept as given


def test_with_attempt_and_reflection_are_replace() -> None:
    """`with_attempt` / `with_reflection` build what ``dataclasses.replace`` builds (a subclass's
    extra fields included), and leave the state they came from as it was."""

    @dataclasses.dataclass(frozen=True, init=False)
    class Tagged(AgentState):
        tag: str = "x"

        def __init__(self, task: Task, attempts: tuple[Attempt, ...] = (), reflections: tuple[str, ...] = (),
                     tag: str = "x") -> None:  # fmt: skip
            super().__init__(task, attempts, reflections)
            self.__dict__["tag"] = tag

    attempt = Attempt("SELECT 2", OUTCOME)
    for state in (AgentState(TASK, (Attempt("a", OUTCOME),), ("r",)), Tagged(TASK, (), ("r",), tag="kept")):
        before = list(vars(state).items())
        for made, want in (
            (state.with_attempt(attempt), dataclasses.replace(state, attempts=state.attempts + (attempt,))),
            (
                state.with_reflection("more"),
                dataclasses.replace(state, reflections=state.reflections + ("more",)),
            ),
        ):
            assert type(made) is type(state) and list(vars(made).items()) == list(vars(want).items())
        assert list(vars(state).items()) == before
