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


def test_sampled_split_is_the_papers_two_seeded_samples_with_shared_ids_removed() -> None:
    import numpy as np

    from cm_gym.core.splits import CONSTRUCTION_SEED_OFFSET, SAMPLED_EVAL_FRACTION

    tasks = _tasks(200, envs=4)
    ids = sorted(t.task_id for t in tasks)
    split = make_split(tasks, seed=12345, kind="sampled")
    assert split == make_split(tasks, seed=12345, kind="sampled")
    n_eval = round(200 * SAMPLED_EVAL_FRACTION)
    # T_eval is exactly the sample drawn with the seed (App. D.2: 12345) ...
    assert list(split.eval) == [
        ids[i] for i in np.random.default_rng(12345).choice(200, n_eval, replace=False)
    ]
    # ... the construction side the sample of seed + 8675309, less the ids both drew
    drawn = [
        ids[i]
        for i in np.random.default_rng(12345 + CONSTRUCTION_SEED_OFFSET).choice(
            200, 200 - n_eval, replace=False
        )
    ]
    shared = set(drawn) & set(split.eval)
    assert shared and list(split.build + split.train) == [i for i in drawn if i not in shared]
    assert not (set(split.build) | set(split.train)) & set(split.eval)
    assert (
        abs(len(split.build) / (len(split.build) + len(split.train)) - 4 / 7) < 0.02
    )  # build : train = 0.4 : 0.3
    env_of = {t.task_id: t.env_id for t in tasks}
    assert {env_of[i] for i in split.eval} & {env_of[i] for i in split.build}  # environments recur
    assert make_split(tasks, seed=7, kind="sampled").eval != split.eval


def test_split_names_map_to_kinds_and_unknown_names_are_refused() -> None:
    from cm_gym.core.splits import split_kind

    assert split_kind("tasks") == "sampled" and split_kind("Databases") == "environments"
    assert split_kind("envs") == "environments" and split_kind("shuffled") == "shuffled"
    with pytest.raises(ValueError, match="unknown split 'by-moon'"):
        split_kind("by-moon")
    with pytest.raises(ValueError, match="split kind"):
        make_split(_tasks(10), kind="tasks")  # a name, not a kind
