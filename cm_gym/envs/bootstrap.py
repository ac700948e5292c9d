"""The bootstrap arithmetic behind every CI cm_gym reports: the one-level percentile interval of a
mean (`percentile_ci`, by ``scipy.stats.bootstrap``), the two-level resampled means of a
(seeds × tasks) matrix (`two_level_bootstrap_means`: ours, scipy has no hierarchical bootstrap)
and the percentile interval of such means (`percentile_interval`). Pure numbers in, numbers out:
`cm_gym.envs.metrics` turns episodes into the arrays, `cm_gym.studies.experiments.stats` reuses
the same functions for the experiment reports. See ``docs/statistics.md``.
"""

from __future__ import annotations

from typing import Any


def percentile_ci(values: Any, resamples: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """The percentile-bootstrap CI of the mean of the 1-d array `values`, by
    ``scipy.stats.bootstrap`` (issue 36: a maintained library for the one-level CI; the two-level
    bootstrap stays ours). Seeded with ``numpy.random.default_rng(seed)``: scipy draws the same
    ``(resamples, n)`` index matrix the hand-written bootstrap it replaced drew, so every CI printed
    before the swap is reproduced (up to floating-point rounding in the last bits:
    tests/envs/test_metrics_scipy.py). One value: its
    own point, as before (scipy needs two)."""
    import numpy as np
    from scipy import stats

    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 1:
        return float(arr[0]), float(arr[0])
    ci = stats.bootstrap(
        (arr,),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    ).confidence_interval
    return float(ci.low), float(ci.high)


def percentile_interval(point: float, means: Any, level: float, **extra: Any) -> dict[str, Any]:
    """``{diff, lo, hi, <extra>, level}``: `point` with the percentile interval of the bootstrap `means`."""
    import numpy as np

    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    out = {"diff": point, "lo": float(lo), "hi": float(hi), **extra, "level": level}
    return out


def two_level_bootstrap_means(diff: Any, resamples: int, seed: int, chunk: int = 500) -> Any:
    """Means of `resamples` two-level resamples of the (units × tasks) matrix `diff`: each draws
    the units (seeds) with replacement, then the tasks with replacement, and averages the drawn
    cells (a unit drawn twice counts twice). Seeded; computed in chunks of `chunk` resamples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n_units, n_tasks = diff.shape
    out = []
    for start in range(0, resamples, chunk):
        b = min(chunk, resamples - start)
        units = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=b)
        tasks = rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=b)
        out.append(((units @ diff) * tasks).sum(axis=1) / (n_units * n_tasks))
    return np.concatenate(out) if out else np.zeros(0)
