from __future__ import annotations

import pytest

from cm_gym.core.splits import make_split
from cm_gym.core.types import Task


def _tasks(n: int, envs: int = 5) -> list[Task]:
    return [
        Task(task_id=f"t{i:03d}", domain="toy", prompt="q", env_id=f"e{i % envs}", reference="")
        for i in range(n)
    ]


def test_split_is_deterministic_disjoint_and_complete() -> None:
    tasks = _tasks(100)
    a, b = make_split(tasks, seed=3), make_split(tasks, seed=3)
    assert a == b
    assert set(a.build) | set(a.train) | set(a.eval) == {t.task_id for t in tasks}
    assert not (set(a.build) | set(a.train)) & set(a.eval)
    assert set(a.validation) <= set(a.train) and a.validation
    assert make_split(tasks, seed=4) != a


def test_split_by_env_keeps_environments_apart() -> None:
    tasks = _tasks(90, envs=9)
    split = make_split(tasks, seed=1, by_env=True)
    env_of = {t.task_id: t.env_id for t in tasks}
    seen = {env_of[i] for i in split.build + split.train}
    assert seen.isdisjoint({env_of[i] for i in split.eval})


def test_split_rejects_bad_fractions_and_duplicate_ids() -> None:
    with pytest.raises(ValueError):
        make_split(_tasks(10), fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="unique"):
        make_split(_tasks(10) + _tasks(1))
