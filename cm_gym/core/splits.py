"""Deterministic build / train (+ validation) / eval splits, by task or by environment."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cm_gym.core.types import Split, Task


def make_split(
    tasks: Sequence[Task],
    *,
    seed: int = 12345,
    fractions: tuple[float, float, float] = (0.4, 0.3, 0.3),
    validation_fraction: float = 0.2,
    by_env: bool = False,
) -> Split:
    """Split task ids into build / train / eval with the given fractions (validation ⊆ train).

    With `by_env`, whole environments (databases, repositories) go to one side so that build and
    train environments never appear in eval. The result is checked for overlap (Eq. 14).
    """
    if abs(sum(fractions) - 1.0) > 1e-6 or min(fractions) < 0:
        raise ValueError(f"fractions must be non-negative and sum to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    ids = sorted({t.task_id for t in tasks})
    if len(ids) != len(tasks):
        raise ValueError("task ids are not unique")
    if by_env:
        envs = sorted({t.env_id for t in tasks})
        order = [envs[i] for i in rng.permutation(len(envs))]
        groups = _cut(order, fractions)
        env_side = {e: side for side, group in enumerate(groups) for e in group}
        sides: list[list[str]] = [[], [], []]
        for t in sorted(tasks, key=lambda t: t.task_id):
            sides[env_side[t.env_id]].append(t.task_id)
    else:
        order = [ids[i] for i in rng.permutation(len(ids))]
        sides = [list(g) for g in _cut(order, fractions)]
    build, train, evaluation = sides
    n_val = max(1, int(round(len(train) * validation_fraction))) if train else 0
    validation = train[:n_val]
    split = Split(tuple(build), tuple(train), tuple(validation), tuple(evaluation))
    split.check()
    return split


def _cut(order: list[str], fractions: tuple[float, float, float]) -> list[list[str]]:
    n = len(order)
    a = int(round(n * fractions[0]))
    b = a + int(round(n * fractions[1]))
    return [order[:a], order[a:b], order[b:]]
