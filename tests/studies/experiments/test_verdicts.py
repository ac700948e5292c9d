"""Every experiment verdict is decided by a confidence interval: each direction type is fed a
case whose point estimates favour the paper but whose CIs straddle zero (a point-estimate
decision would say "reproduced"; a CI decision says "inconclusive"), and a clear case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from cm_gym.studies.experiments import ablations, accumulation, rescue, table1
from cm_gym.studies.experiments.reporting import verdict_positive
from cm_gym.studies.experiments.stats import Estimate, mean_ci, two_level_ci

WIDE = Estimate(2.0, -1.0, 5.0, 40)  # positive point, CI across 0
CLEAR = Estimate(2.0, 0.5, 3.5, 40)


def test_verdict_needs_an_interval() -> None:
    assert verdict_positive(Estimate(3.0, None, None, 1)) == "inconclusive"  # a point is not enough
    assert verdict_positive(mean_ci([4.0])) == "inconclusive"
    assert verdict_positive(mean_ci([4.0, 5.0, 6.0], resamples=0)) == "inconclusive"
    assert verdict_positive(WIDE) == "inconclusive" and verdict_positive(CLEAR) == "reproduced"
    assert verdict_positive(Estimate(-2.0, -3.0, -1.0, 9)) == "not reproduced"
    assert verdict_positive(None) == "not measured"


@dataclass
class _Cfg:
    benchmarks: tuple[str, ...] = ("SQL",)
    agents: tuple[str, ...] = ("react",)
    bootstrap: int = 400


class FakeStudy:
    """A study whose paired estimates are given: ``(base tag, treated tag, key) -> Estimate``."""

    def __init__(self, estimates: dict[tuple[str, str, str], Estimate], default: Estimate) -> None:
        self.cfg, self.est, self.default = _Cfg(), estimates, default

    def paired(self, base: Any, treated: Any, ids: Any = None, key: str = "score") -> Estimate:
        return self.est.get((base[0]["tag"], treated[0]["tag"], key), self.default)

    def paired_rate(self, base: Any, treated: Any, num: str, den: str, *a: Any) -> Estimate:
        return self.est.get((base[0]["tag"], treated[0]["tag"], num), self.default)


def _run(tag: str, tokens: float = 10.0) -> list[dict]:
    return [{"tag": tag, "episodes": [{"task_id": "t", "tokens": tokens}]}]


@pytest.mark.parametrize("ci,expected", [(WIDE, "inconclusive"), (CLEAR, "reproduced")])
def test_ablation_calls_direction(ci: Estimate, expected: str) -> None:
    r = {
        m: _run(m) for m in ("none", "cf_without_wm", "wm_without_cf", "matched", "no_retrieval", "shuffled")
    }
    calls = {
        "none": Estimate(9.6),
        "cf_without_wm": Estimate(10.4),
        "wm_without_cf": Estimate(9.0),
        "matched": Estimate(7.0),
    }
    dirs = ablations._directions(FakeStudy({}, ci), "SQL", "react", r, calls)
    calls_dir = next(d for d in dirs if "calls per solved" in d.claim)
    assert calls_dir.verdict == expected  # the points (10.4 > 9.6 > 7.0) alone would say reproduced


@pytest.mark.parametrize("ci,expected", [(WIDE, "inconclusive"), (CLEAR, "reproduced")])
def test_rescue_net_direction(ci: Estimate, expected: str) -> None:
    res = {("SQL", m): _run(m) for m in ("none", "reasoningbank", "countermem")}
    nets = {("SQL", "countermem"): Estimate(25.0, n=120), ("SQL", "reasoningbank"): Estimate(4.0, n=120)}
    d = rescue.net_direction(FakeStudy({}, ci), res, "SQL", "Text-to-SQL", nets)
    assert d.verdict == expected  # positive nets, CF above RB: a point decision would reproduce it


@pytest.mark.parametrize("ci,expected", [(WIDE, "inconclusive"), (CLEAR, "reproduced")])
def test_table1_directions(ci: Estimate, expected: str) -> None:
    runs = {
        ("SQL", "react", m): _run(m, tokens=100.0 if m == "best_of_n" else 10.0) for m in table1.MECHANISMS
    }
    dirs = table1.directions(FakeStudy({}, ci), runs)  # type: ignore[arg-type]
    assert {d.verdict for d in dirs} == {expected}
    bon = next(d for d in dirs if "Best-of-N" in d.claim)
    assert bon.verdict == expected  # 100 vs 10 tokens per task: a point decision would reproduce it


def _units(values: list[float], noise: float, seed: int = 0, n_tasks: int = 30) -> list[dict[str, float]]:
    """Per ordering, per task: the ordering's value plus task noise."""
    rng = np.random.default_rng(seed)
    return [{f"t{i}": v + rng.normal(0.0, noise) for i in range(n_tasks)} for v in values]


def _accumulation_units(noise: float, ordering_sd: float) -> dict:
    rng = np.random.default_rng(1)
    ckpts = [0, 8, 16, 24]
    units: dict = {}
    cm_mean, rb_mean = [50, 54, 58, 62], [50, 56, 60, 52]
    for m, means in (("countermem", cm_mean), ("reasoningbank", rb_mean)):
        for i, c in enumerate(ckpts):
            per_ordering = [means[i] + rng.normal(0.0, ordering_sd) for _ in range(2)]
            units[(m, c, "score")] = _units(per_ordering, noise, seed=10 * i + 5 * (m == "countermem"))
            units[(m, c, "tokens")] = _units([100.0 * (i + 1)] * 2, noise, seed=20 + i)
            if c >= 8:
                early = 70.0 - (1.0 if m == "countermem" else 6.0) * i
                units[(m, c, "early")] = _units(
                    [early + rng.normal(0.0, ordering_sd) for _ in range(2)],
                    noise,
                    seed=30 + i + 50 * (m == "countermem"),
                )
    curves = {m: {"score": [(float(np.mean([np.mean(list(u.values())) for u in units[(m, c, "score")]])), 0.0)
                            for c in ckpts]} for m in ("countermem", "reasoningbank")}  # fmt: skip
    return {"ckpts": ckpts, "units": units, "curves": curves}


def test_accumulation_directions_follow_the_intervals() -> None:
    clear = _accumulation_units(noise=1.0, ordering_sd=0.0)
    dirs = accumulation._directions("SQL", clear["ckpts"], 8, clear["curves"], clear["units"], 400)
    assert [d.verdict for d in dirs] == ["reproduced"] * 4
    noisy = _accumulation_units(noise=60.0, ordering_sd=0.0)  # same means, tasks far too noisy
    dirs = accumulation._directions("SQL", noisy["ckpts"], 8, noisy["curves"], noisy["units"], 400)
    verdicts = {d.claim.split(": ", 1)[1]: d.verdict for d in dirs}

    def verdict(start: str) -> str:
        return next(v for claim, v in verdicts.items() if claim.startswith(start))

    assert verdict("CounterMem's held-out score keeps rising") == "inconclusive"
    assert verdict("ReasoningBank's held-out score first rises") == "inconclusive"
    assert verdict("CounterMem loses less") == "inconclusive"


def test_two_level_ci_for_orderings() -> None:
    same = two_level_ci([{"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 1.0}], resamples=100)
    assert same.value == 1.0 and same.lo == same.hi == 1.0 and verdict_positive(same) == "reproduced"
    assert two_level_ci([{"a": 1.0}, {"b": 2.0}]).value is None  # no task in every unit
