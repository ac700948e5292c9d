"""Calibration of the simulated revision: the exact linear model of the published rates, the
least-squares fit, and the fit to a cached run (round trip through a real response cache)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cm_gym.domains.base import RevisionRates
from cm_gym.envs.metrics import EpisodeCounters
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.revision import load_revision_rates, save_revision_rates
from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.studies.analysis.calibrate import PAPER_TARGETS, Row, Target, compare, fit, linear_rate
from cm_gym.studies.analysis.calibrate_cache import CalibrationError, cache_table, fit_from_cache
from cm_gym.studies.analysis.calibrate_run import CalibrateConfig
from tests.envs.toy_env import TOY_BENCHMARK, build_toy_store, make_toy
from tests.toy_domain import toy_tasks


def _rows(rng: np.random.Generator, n: int = 300) -> list[Row]:
    rows = []
    for setting in ("matched", "shuffled", "no_condition"):
        for _ in range(n):
            closeness = str(rng.choice(["match", "analogous", "unrelated"], p=[0.4, 0.2, 0.4]))
            change = {b: float(rng.uniform(0.5, 1.0)) for b in ("apply", "overapply", "disturb")}
            harm = {b: float(rng.uniform(0.0, change[b])) for b in change}
            look = bool(rng.random() < 0.3)
            rows.append(Row(setting, int(rng.integers(1, 4)), closeness, look, change, harm))
    return rows


def test_a_published_rate_is_exactly_linear_in_the_revision_rates() -> None:
    rows = _rows(np.random.default_rng(0))
    rates = RevisionRates(
        apply=0.6, match_disturb=0.1, overapply=0.4, analogous_disturb=0.2, unrelated_disturb=0.1
    )
    target = Target("t", 0.0, "test", "shuffled", "retrieved", "all", "harm")
    by_hand, retrieved = [], 0
    for r in rows:
        if r.setting != "shuffled":
            continue
        retrieved += 1
        if r.slot != 1:  # only the shown (top-1) record acts; the others only count as retrieved
            continue
        p = rates.probabilities(r.closeness)
        by_hand.append(sum(p[b] * r.harm.get(b, 0.0) for b in ("apply", "overapply", "disturb")))
    assert linear_rate(rows, target).value(rates) == pytest.approx(float(np.sum(by_hand)) / retrieved)
    selected = Target("s", 0.0, "test", "matched", "selected", "lookalike", "change")
    assert linear_rate(rows, selected).n == sum(
        r.setting == "matched" and r.slot == 1 and r.lookalike is True for r in rows
    )


def test_fig4d_rates_count_like_the_ablations_study() -> None:
    """Fig. 4d's "per retrieved record": the changes made by the one record shown at a decision
    divided by all records retrieved — the ablations study's actions_changed_by_memory /
    retrieved_records on the same decisions — not every retrieved record's effect if it were shown."""
    rng = np.random.default_rng(3)
    rates = RevisionRates(
        apply=1.0, match_disturb=0.0, overapply=0.0, analogous_disturb=0.0, unrelated_disturb=0.0
    )
    rows: list[Row] = []
    counters = EpisodeCounters()
    retrieved = 0
    for _ in range(40):  # decisions with 1..3 retrieved records; every record would change the draft if shown
        k = int(rng.integers(1, 4))
        shown_changes = bool(rng.random() < 0.5)
        for slot in range(1, k + 1):
            closeness = "match" if slot > 1 or shown_changes else "unrelated"
            rows.append(Row("matched", slot, closeness, None, {"apply": 1.0, "disturb": 1.0}, {}))
        # the same decision as the ablations study counts it: the shown (top-1) record's effect
        counters.update({"record_id": "r1", "changed_by_memory": shown_changes})
        retrieved += k
    target = next(t for t in PAPER_TARGETS if t.name == "matched: action changes")
    lr = linear_rate(rows, target)
    assert lr.n == retrieved
    assert lr.value(rates) == pytest.approx(counters.actions_changed_by_memory / retrieved)
    # what every retrieved record would do if shown is a different (larger) number
    would = sum(r.closeness == "match" for r in rows) / len(rows)
    assert lr.value(rates) < would


def test_fit_recovers_rates_that_generated_the_targets() -> None:
    rows = _rows(np.random.default_rng(1))
    truth = RevisionRates(
        apply=0.7, match_disturb=0.05, overapply=0.5, analogous_disturb=0.1, unrelated_disturb=0.2
    )
    targets = [
        Target(
            f"{t.name}",
            linear_rate(rows, t).value(truth) or 0.0,
            t.source,
            t.setting,
            t.per,
            t.subset,
            t.measure,
        )
        for t in PAPER_TARGETS
    ]
    fitted = fit(rows, targets, prior=RevisionRates())
    for row in compare(rows, fitted, targets):
        assert row["simulator"] == pytest.approx(row["paper"], abs=0.01)


def test_fit_from_a_cached_run_recovers_the_simulators_rates(tmp_path: Path) -> None:
    """Play the toy env with a simulator of known rates behind a real response cache, then fit
    the rates back from the cache alone."""
    truth = RevisionRates(apply=0.9, match_disturb=0.0, unrelated_disturb=0.5)
    rates_path = save_revision_rates(tmp_path / "truth.json", {"toycmp": truth})
    cache_path = _toy_cache(tmp_path, 160, SimulatedLLM(revision_rates=rates_path), seed=0)
    cfg = CalibrateConfig(benchmark=TOY_BENCHMARK, llm_cache=cache_path, out=tmp_path / "fitted.json")
    result = fit_from_cache(cfg)
    assert result["entries"] >= 40 and result["counts"]["match"] and result["counts"]["unrelated"]
    fitted = load_revision_rates(tmp_path / "fitted.json")["toycmp"]
    assert fitted.apply == pytest.approx(truth.apply, abs=0.15)
    assert fitted.unrelated_disturb == pytest.approx(truth.unrelated_disturb, abs=0.2)
    assert "overapply" in result["kept_defaults"]  # the toy records are never analogous


def test_a_cache_without_revisions_is_refused(tmp_path: Path) -> None:
    cache_path = tmp_path / "empty.sqlite"
    ResponseCache(cache_path).close()
    with pytest.raises(CalibrationError, match="no usable REVISE_WITH_RECORD"):
        fit_from_cache(
            CalibrateConfig(benchmark=TOY_BENCHMARK, llm_cache=cache_path, out=tmp_path / "r.json")
        )


def _toy_cache(tmp_path: Path, n_tasks: int, simulator: SimulatedLLM | None = None, seed: int = 1) -> Path:
    """A response cache filled by playing the toy env (random valid actions) on `n_tasks` tasks."""
    cache_path = tmp_path / f"cache{n_tasks}.sqlite"
    llm = CachedLLM(simulator or SimulatedLLM(), ResponseCache(cache_path))
    store = build_toy_store(tmp_path / f"toy{n_tasks}.sqlite")
    tasks = toy_tasks(n_tasks)
    env = make_toy(str(store), llm=llm, tasks=tasks, use_conditions=False)
    rng = np.random.default_rng(seed)
    for task in tasks:
        _, info = env.reset(options={"task_id": task.task_id})
        done = False
        while not done:
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            _, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
    llm.cache.close()
    return cache_path


def test_thin_evidence_is_refused_and_named(tmp_path: Path) -> None:
    """Below --min-count a rate keeps its default and is named with its count; when no rate has
    enough entries nothing is written; every rate is reported with k / n and a 95% interval."""
    cache_path = _toy_cache(tmp_path, 24)
    out = tmp_path / "rates.json"
    with pytest.raises(CalibrationError, match=r"too few to fit any rate .*apply \(n=\d+\)"):
        fit_from_cache(
            CalibrateConfig(benchmark=TOY_BENCHMARK, llm_cache=cache_path, out=out, min_count=10_000)
        )
    assert not out.exists()
    result = fit_from_cache(
        CalibrateConfig(benchmark=TOY_BENCHMARK, llm_cache=cache_path, out=out, min_count=1)
    )
    evidence = result["evidence"]
    n_match = sum(result["counts"]["match"].values())
    assert evidence["apply"]["n"] == n_match > 0
    low, high = evidence["apply"]["ci95"]
    assert 0.0 <= low <= evidence["apply"]["share"] <= high <= 1.0 and high - low > 0.0
    assert "apply" not in result["kept_defaults"] and "overapply" in result["kept_defaults"]
    # a threshold between the bins' counts keeps the thinner bin's rate at its default, named
    n_unrelated = sum(result["counts"]["unrelated"].values())
    assert 0 < n_unrelated < n_match  # the seeded toy run: fewer unrelated than matching records
    mid = fit_from_cache(
        CalibrateConfig(benchmark=TOY_BENCHMARK, llm_cache=cache_path, out=out, min_count=n_unrelated + 1)
    )
    assert "unrelated_disturb" in mid["kept_defaults"] and "apply" not in mid["kept_defaults"]
    assert mid["fitted_rates"]["unrelated_disturb"] == pytest.approx(RevisionRates().unrelated_disturb)
    table = cache_table(mid)
    assert f"unrelated_disturb (n={n_unrelated})" in table and "95% CI" in table
