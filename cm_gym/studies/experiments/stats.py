"""Per-task values, seed averaging and bootstrap confidence intervals for the experiment reports.

SPEC §8: every comparison of two policies reports a paired bootstrap CI over tasks, seeds averaged
per task. `per_task` averages each task's value over the seeds (runs) that have it; `mean_ci` is
the percentile bootstrap of a mean over tasks; `paired_ci` the percentile bootstrap of the mean
per-task difference over the tasks both sides ran. `two_level_ci` / `paired_two_level` resample
an upper level too (orderings, seeds: `cm_gym.envs.bootstrap.two_level_bootstrap_means`), for
directions whose replication unit is above the task. Resampling is seeded, so a report is
reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.envs.bootstrap import percentile_ci, two_level_bootstrap_means


@dataclass(frozen=True)
class Estimate:
    """A mean with its bootstrap CI over `n` tasks (None when nothing was measured)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci": [self.lo, self.hi], "n": self.n}

    @property
    def excludes_zero(self) -> bool:
        """The CI lies entirely above or entirely below 0."""
        return self.lo is not None and self.hi is not None and (self.lo > 0 or self.hi < 0)


def per_task(
    runs: Sequence[Sequence[Mapping[str, Any]]], key: str = "score", scale: float = 1.0
) -> dict[str, float]:
    """Each task's `key` averaged over the runs (seeds) that contain it, times `scale`."""
    sums: dict[str, list[float]] = {}
    for episodes in runs:
        for e in episodes:
            sums.setdefault(str(e["task_id"]), []).append(float(e[key]) * scale)
    return {t: float(np.mean(v)) for t, v in sums.items()}


def mean_ci(
    values: Mapping[str, float] | Sequence[float], resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> Estimate:
    """Mean over tasks with a percentile-bootstrap CI (none — lo and hi None — for one task or
    no resamples: then no verdict can be reproduced or refuted on it)."""
    arr = np.asarray(list(values.values()) if isinstance(values, Mapping) else list(values), dtype=np.float64)
    if arr.size == 0:
        return Estimate(None)
    if arr.size == 1 or resamples <= 0:  # no interval: a verdict must not rest on a point value
        return Estimate(float(arr.mean()), None, None, int(arr.size))
    lo, hi = percentile_ci(arr, resamples, seed, level)
    return Estimate(float(arr.mean()), lo, hi, int(arr.size))


def paired_ci(
    base: Mapping[str, float],
    treated: Mapping[str, float],
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Estimate:
    """Mean of treated − base over the tasks in both, with a paired percentile-bootstrap CI."""
    common = sorted(set(base) & set(treated))
    return mean_ci([treated[t] - base[t] for t in common], resamples, seed, level)


def ratio_of_sums(episodes: Sequence[Mapping[str, Any]], num: str, den: str) -> float | None:
    """sum(num) / sum(den) over episodes (None when the denominator is 0)."""
    d = sum(float(e[den]) for e in episodes)
    return sum(float(e[num]) for e in episodes) / d if d else None


def seed_mean(values: Sequence[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return float(np.mean(clean)) if clean else None


def two_level_ci(
    units: Sequence[Mapping[str, float]], resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> Estimate:
    """Mean over units (orderings, seeds) and the tasks every unit has, with a two-level
    percentile-bootstrap CI (units with replacement, then tasks with replacement); `n` = tasks."""
    units = [u for u in units if u]
    tasks = sorted(set.intersection(*(set(u) for u in units))) if units else []
    if not tasks:
        return Estimate(None)
    arr = np.array([[u[t] for t in tasks] for u in units], dtype=np.float64)
    if resamples <= 0 or arr.size == 1:
        return Estimate(float(arr.mean()), None, None, len(tasks))
    means = two_level_bootstrap_means(arr, resamples, seed)
    a = (1.0 - level) / 2.0
    return Estimate(
        float(arr.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a)), len(tasks)
    )


def paired_two_level(
    base: Sequence[Mapping[str, float]],
    treated: Sequence[Mapping[str, float]],
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Estimate:
    """treated − base per unit (paired by position: the same ordering or seed) and task, with
    `two_level_ci`."""
    diffs = [{t: tr[t] - b[t] for t in set(b) & set(tr)} for b, tr in zip(base, treated, strict=True)]
    return two_level_ci(diffs, resamples, seed, level)
