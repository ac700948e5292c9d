"""One-level CIs come from ``scipy.stats.bootstrap`` (issue 36) and reproduce, to the bit, the
hand-written percentile bootstrap they replaced: the same resamples, the same interval up to the
last bits of floating-point rounding (scipy's percentile arithmetic differs from ``np.quantile``'s)
— so every CI printed in the README and the docs before the swap is still what the code prints."""

from __future__ import annotations

import numpy as np
import pytest

from cm_gym.envs.bootstrap import percentile_ci
from cm_gym.envs.metrics import paired_bootstrap
from cm_gym.studies.experiments.stats import mean_ci


def _hand_written(values: np.ndarray, resamples: int, seed: int, level: float) -> tuple[float, float]:
    """The bootstrap cm_gym used before: seeded index matrix, means, linear quantiles."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(lo), float(hi)


@pytest.mark.parametrize("n", [2, 3, 17, 24, 250])
@pytest.mark.parametrize("seed", [0, 7])
def test_scipy_ci_equals_the_hand_written_one(n: int, seed: int) -> None:
    values = np.random.default_rng(100 + n).normal(size=n) * 30.0
    for level in (0.95, 0.9):
        assert percentile_ci(values, 2000, seed, level) == pytest.approx(
            _hand_written(values, 2000, seed, level), rel=1e-12, abs=1e-12
        )


def test_paired_bootstrap_keeps_its_shape_and_pairs_by_task() -> None:
    rng = np.random.default_rng(3)
    treated = {f"t{i}": float(v) for i, v in enumerate(rng.integers(0, 2, 40) * 100)}
    baseline = {f"t{i}": float(v) for i, v in enumerate(rng.integers(0, 2, 40) * 100)}
    baseline["only-baseline"] = 0.0
    out = paired_bootstrap(treated, baseline, n_boot=3000, seed=1)
    d = np.array([treated[t] - baseline[t] for t in sorted(treated)])
    assert out["n_tasks"] == 40 and out["n_boot"] == 3000 and out["level"] == 0.95
    assert out["diff"] == pytest.approx(d.mean())
    assert (out["lo"], out["hi"]) == pytest.approx(_hand_written(d, 3000, 1, 0.95), abs=1e-12)
    assert out["lo"] <= out["diff"] <= out["hi"]


def test_one_task_and_constant_differences() -> None:
    assert percentile_ci(np.array([4.0]), 1000, 0) == (4.0, 4.0)
    assert percentile_ci(np.zeros(9), 1000, 0) == (0.0, 0.0)
    assert paired_bootstrap({"a": 1.0}, {"b": 1.0})["n_tasks"] == 0
    est = mean_ci({"a": 10.0, "b": 30.0}, resamples=500, seed=2)
    assert (est.lo, est.hi) == pytest.approx(_hand_written(np.array([10.0, 30.0]), 500, 2, 0.95), abs=1e-12)
