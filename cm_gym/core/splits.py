"""Deterministic build / train (+ validation) / eval splits: by task or by environment.

Three kinds (`SPLIT_KINDS`), each seeded and checked for overlap (Eq. 14):

* ``"shuffled"`` — one seeded permutation of the task ids cut by `fractions` (build, train, eval).
* ``"sampled"`` — the paper's held-out SQL configuration (App. D.2, "same environment, new
  request"): the evaluation set is a sample of `SAMPLED_EVAL_FRACTION` of the tasks drawn with
  `seed`, the construction set a sample of the rest of the fraction drawn with
  ``seed + CONSTRUCTION_SEED_OFFSET`` (the paper's 12345 + 8675309); the task ids the two samples
  share are removed from the construction side (so T_eval stays exactly the seeded sample), and
  what is left is cut into build and train in the ratio of `fractions`. Environments (databases)
  may recur on both sides.
* ``"environments"`` — whole environments (databases, repositories) on one side, so that build
  and train environments never appear in eval: the "new environment" (transfer) condition.

A benchmark names its default (`cm_gym.domains.catalog.BenchmarkSpec.split_kind`); commands and
envs take one of `SPLIT_NAMES` (``tasks`` = sampled, ``databases`` / ``envs`` = environments).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cm_gym.core.types import Split, Task

SPLIT_KINDS = ("shuffled", "sampled", "environments")
#: Names a user may give (``--split``, ``gym.make(..., split=...)``) → split kinds.
SPLIT_NAMES: Mapping[str, str] = {
    "tasks": "sampled",
    "sampled": "sampled",
    "shuffled": "shuffled",
    "environments": "environments",
    "envs": "environments",
    "databases": "environments",
}
#: What each kind is, in the words results and tables use.
SPLIT_LABELS: Mapping[str, str] = {
    "shuffled": "tasks shuffled by seed and cut (build / train / eval)",
    "sampled": (
        "tasks sampled by seed, shared ids removed (paper App. D.2: same environment, new request; "
        "environments may recur)"
    ),
    "environments": "environments apart (the 'new environment' condition: no eval environment seen)",
}
#: The paper's evaluation share (40 of 100) and its construction seed offset (App. D.2).
SAMPLED_EVAL_FRACTION = 0.4
CONSTRUCTION_SEED_OFFSET = 8675309


def split_kind(name: str) -> str:
    """The split kind of a user-facing name (`SPLIT_NAMES`); ValueError naming the choices."""
    kind = SPLIT_NAMES.get(str(name).strip().lower())
    if kind is None:
        raise ValueError(f"unknown split {name!r}; use one of {', '.join(SPLIT_NAMES)}")
    return kind


def make_split(
    tasks: Sequence[Task],
    *,
    seed: int = 12345,
    fractions: tuple[float, float, float] = (0.4, 0.3, 0.3),
    validation_fraction: float = 0.2,
    by_env: bool = False,
    kind: str | None = None,
) -> Split:
    """Split task ids into build / train / eval (validation ⊆ train) by `kind` (see the module
    docstring; None: ``"environments"`` with `by_env`, else ``"shuffled"``). The result is checked
    for overlap (Eq. 14)."""
    if abs(sum(fractions) - 1.0) > 1e-6 or min(fractions) < 0:
        raise ValueError(f"fractions must be non-negative and sum to 1, got {fractions}")
    kind = kind or ("environments" if by_env else "shuffled")
    if kind not in SPLIT_KINDS:
        raise ValueError(f"split kind must be one of {SPLIT_KINDS}, got {kind!r}")
    rng = np.random.default_rng(seed)
    ids = sorted({t.task_id for t in tasks})
    if len(ids) != len(tasks):
        raise ValueError("task ids are not unique")
    if kind == "environments":
        envs = sorted({t.env_id for t in tasks})
        order = [envs[i] for i in rng.permutation(len(envs))]
        groups = _cut(order, fractions)
        env_side = {e: side for side, group in enumerate(groups) for e in group}
        sides: list[list[str]] = [[], [], []]
        for t in sorted(tasks, key=lambda t: t.task_id):
            sides[env_side[t.env_id]].append(t.task_id)
    elif kind == "sampled":
        sides = _sampled(ids, seed, fractions)
    else:
        order = [ids[i] for i in rng.permutation(len(ids))]
        sides = [list(g) for g in _cut(order, fractions)]
    build, train, evaluation = sides
    n_val = max(1, int(round(len(train) * validation_fraction))) if train else 0
    validation = train[:n_val]
    split = Split(tuple(build), tuple(train), tuple(validation), tuple(evaluation))
    split.check()
    return split


def _sampled(ids: list[str], seed: int, fractions: tuple[float, float, float]) -> list[list[str]]:
    """App. D.2: T_eval sampled with `seed`, the construction set with seed + 8675309 from all
    ids, the ids both drew removed from the construction side, the rest cut into build / train
    in the ratio fractions[0] : fractions[1]."""
    n = len(ids)
    n_eval = int(round(n * SAMPLED_EVAL_FRACTION))
    evaluation = [ids[i] for i in np.random.default_rng(seed).choice(n, size=n_eval, replace=False)]
    drawn = np.random.default_rng(seed + CONSTRUCTION_SEED_OFFSET).choice(n, size=n - n_eval, replace=False)
    held = set(evaluation)
    construction = [ids[i] for i in drawn if ids[i] not in held]  # shared ids removed
    build_share = fractions[0] / (fractions[0] + fractions[1]) if fractions[0] + fractions[1] else 0.0
    cut = int(round(len(construction) * build_share))
    return [construction[:cut], construction[cut:], evaluation]


def _cut(order: list[str], fractions: tuple[float, float, float]) -> list[list[str]]:
    n = len(order)
    a = int(round(n * fractions[0]))
    b = a + int(round(n * fractions[1]))
    return [order[:a], order[a:b], order[b:]]
