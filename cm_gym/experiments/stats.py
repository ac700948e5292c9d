"""Per-task values, seed averaging and bootstrap confidence intervals for the experiment reports.

SPEC §8: every comparison of two policies reports a paired bootstrap CI over tasks, seeds averaged
per task. `per_task` averages each task's value over the seeds (runs) that have it; `mean_ci` is
the percentile bootstrap of a mean over tasks; `paired_ci` the percentile bootstrap of the mean
per-task difference over the tasks both sides ran. Resampling is seeded, so a report is
reproducible. (When `cm_gym.metrics` gains its own paired-bootstrap functions, reports should
use those; this module keeps the experiment side's contract in one place.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.metrics import bootstrap_means


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
    """Mean over tasks with a percentile-bootstrap CI."""
    arr = np.asarray(list(values.values()) if isinstance(values, Mapping) else list(values), dtype=np.float64)
    if arr.size == 0:
        return Estimate(None)
    if arr.size == 1 or resamples <= 0:
        return Estimate(float(arr.mean()), float(arr.mean()), float(arr.mean()), int(arr.size))
    means = bootstrap_means(arr, resamples, seed)
    a = (1.0 - level) / 2.0
    return Estimate(
        float(arr.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a)), int(arr.size)
    )


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
