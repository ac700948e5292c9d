"""What every study shares: the `Study` it runs in (config, runner, planner, output folder) and the
metrics it reads off evaluation results, each with its own denominator (SPEC §8, paper D.4, D.6).

An evaluation result holds one list of episode dicts per seed; a *run* below is such a list of
result units (one per seed, or one for a deterministic mechanism)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.studies.experiments.config import ExperimentConfig
from cm_gym.studies.experiments.plan import Planner
from cm_gym.studies.experiments.runner import Runner, Unit, UnitResult
from cm_gym.studies.experiments.stats import Estimate, mean_ci, paired_ci, per_task

Episodes = list[dict[str, Any]]


@dataclass
class Study:
    """One study's run: its config, the shared runner and planner, and its report folder."""

    name: str
    cfg: ExperimentConfig
    runner: Runner
    plan: Planner = field(init=False)

    def __post_init__(self) -> None:
        self.plan = Planner(self.cfg)

    @property
    def out_dir(self) -> Path:
        path = self.cfg.results_dir / "reports" / self.name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run(self, units: Sequence[Unit]) -> list[UnitResult]:
        return self.runner.run(units)

    def run_groups(self, groups: dict[Any, list[Unit]]) -> dict[Any, list[UnitResult]]:
        """Run every unit of every group in one batch (parallel), then regroup the results."""
        flat = [u for units in groups.values() for u in units]
        results = iter(self.runner.run(flat))
        return {key: [next(results) for _ in units] for key, units in groups.items()}

    # -- metrics ------------------------------------------------------------------------------
    def score(self, run: Sequence[UnitResult], ids: Sequence[str] | None = None) -> Estimate:
        """Score 0–100 (mean final-attempt U), CI over tasks, seeds averaged per task."""
        return mean_ci(restrict(per_task(episode_runs(run), "score", 100.0), ids), self.cfg.bootstrap)

    def paired(
        self,
        base: Sequence[UnitResult],
        treated: Sequence[UnitResult],
        ids: Sequence[str] | None = None,
        key: str = "score",
    ) -> Estimate:
        """treated − base (score in pp by default), paired by task, seeds averaged per task."""
        scale = 100.0 if key == "score" else 1.0
        a = restrict(per_task(episode_runs(base), key, scale), ids)
        b = restrict(per_task(episode_runs(treated), key, scale), ids)
        return paired_ci(a, b, self.cfg.bootstrap)

    def rate(
        self,
        run: Sequence[UnitResult],
        num: str,
        den: str,
        ids: Sequence[str] | None = None,
        scale: float = 1.0,
    ) -> Estimate:
        """A pooled ratio sum(num) / sum(den) (seeds pooled), with a bootstrap CI over tasks."""
        return ratio_ci(episode_runs(run), num, den, ids, self.cfg.bootstrap, scale)

    def paired_rate(
        self,
        base: Sequence[UnitResult],
        treated: Sequence[UnitResult],
        num: str,
        den: str,
        ids: Sequence[str] | None = None,
        scale: float = 1.0,
    ) -> Estimate:
        """treated's ratio − base's ratio, both resampled on the same tasks."""
        return paired_ratio_ci(
            episode_runs(base), episode_runs(treated), num, den, ids, self.cfg.bootstrap, scale
        )


def episode_runs(run: Sequence[UnitResult]) -> list[Episodes]:
    return [list(r["episodes"]) for r in run]


def restrict(values: dict[str, float], ids: Sequence[str] | None) -> dict[str, float]:
    if ids is None:
        return values
    keep = set(ids)
    return {k: v for k, v in values.items() if k in keep}


def _task_sums(
    runs: Sequence[Episodes], num: str, den: str, ids: Sequence[str] | None
) -> dict[str, tuple[float, float]]:
    out: dict[str, list[float]] = {}
    keep = set(ids) if ids is not None else None
    for episodes in runs:
        for e in episodes:
            t = str(e["task_id"])
            if keep is None or t in keep:
                acc = out.setdefault(t, [0.0, 0.0])
                acc[0] += float(e[num])
                acc[1] += float(e[den])
    return {t: (v[0], v[1]) for t, v in out.items()}


def _ratio_boot(sums: np.ndarray, idx: np.ndarray) -> np.ndarray:
    num, den = sums[idx, 0].sum(axis=1), sums[idx, 1].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def ratio_ci(
    runs: Sequence[Episodes],
    num: str,
    den: str,
    ids: Sequence[str] | None,
    resamples: int,
    scale: float = 1.0,
) -> Estimate:
    """sum(num)/sum(den) over tasks (seeds pooled) with a bootstrap CI resampling tasks."""
    sums = _task_sums(runs, num, den, ids)
    arr = np.array(list(sums.values()), dtype=np.float64).reshape(-1, 2)
    if arr.size == 0 or arr[:, 1].sum() == 0:
        return Estimate(None, n=int(arr[:, 1].sum()) if arr.size else 0)
    value = scale * arr[:, 0].sum() / arr[:, 1].sum()
    rng = np.random.default_rng(0)
    boots = scale * _ratio_boot(arr, rng.integers(0, len(arr), size=(max(1, resamples), len(arr))))
    boots = boots[~np.isnan(boots)]
    lo, hi = (
        (float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))) if boots.size else (None, None)
    )
    return Estimate(float(value), lo, hi, int(arr[:, 1].sum()))


def paired_ratio_ci(
    base: Sequence[Episodes],
    treated: Sequence[Episodes],
    num: str,
    den: str,
    ids: Sequence[str] | None,
    resamples: int,
    scale: float = 1.0,
) -> Estimate:
    """Difference of two pooled ratios over the tasks both ran, resampling the same tasks."""
    a, b = _task_sums(base, num, den, ids), _task_sums(treated, num, den, ids)
    common = sorted(set(a) & set(b))
    if not common:
        return Estimate(None)
    A = np.array([a[t] for t in common], dtype=np.float64)
    B = np.array([b[t] for t in common], dtype=np.float64)
    if A[:, 1].sum() == 0 or B[:, 1].sum() == 0:
        return Estimate(None, n=len(common))
    value = scale * (B[:, 0].sum() / B[:, 1].sum() - A[:, 0].sum() / A[:, 1].sum())
    idx = np.random.default_rng(0).integers(0, len(common), size=(max(1, resamples), len(common)))
    diff = scale * (_ratio_boot(B, idx) - _ratio_boot(A, idx))
    diff = diff[~np.isnan(diff)]
    lo, hi = (float(np.quantile(diff, 0.025)), float(np.quantile(diff, 0.975))) if diff.size else (None, None)
    return Estimate(float(value), lo, hi, len(common))


def total_tokens_m(run: Sequence[UnitResult], ids: Sequence[str] | None = None) -> float:
    """Total task-run tokens in millions, averaged over seeds."""
    keep = set(ids) if ids is not None else None
    totals = [
        sum(float(e["tokens"]) for e in r["episodes"] if keep is None or e["task_id"] in keep) for r in run
    ]
    return float(np.mean(totals)) / 1e6 if totals else 0.0


def per_task_mean(
    run: Sequence[UnitResult], key: str, ids: Sequence[str] | None = None, resamples: int = 2000
) -> Estimate:
    """Mean of a per-episode counter per task (seeds averaged), with CI."""
    return mean_ci(restrict(per_task(episode_runs(run), key), ids), resamples)


def sd(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
