"""Honest statistics: the two-level (seeds and tasks) paired bootstrap next to the task-only one,
exact pooling of run summaries, and both CIs in the results table."""

from __future__ import annotations

import numpy as np
import pytest

from cm_gym.envs.metrics import (
    paired_bootstrap,
    per_task_by_seed,
    pool_summaries,
    seed_averaged,
    summarize,
    two_level_bootstrap_means,
    two_level_comparisons,
    two_level_paired_bootstrap,
)
from cm_gym.protocol.report import ci_table, markdown_table, results_json


def _seed_dominated(
    seed_sd: float, task_sd: float, n_seeds: int = 5, n_tasks: int = 300, effect: float = 2.0
):
    rng = np.random.default_rng(7)
    shift = rng.normal(0.0, seed_sd, n_seeds)
    treated = {
        s: {f"t{t}": effect + shift[s] + rng.normal(0.0, task_sd) for t in range(n_tasks)}
        for s in range(n_seeds)
    }
    baseline = {s: {f"t{t}": 0.0 for t in range(n_tasks)} for s in range(n_seeds)}
    return treated, baseline


def test_two_level_ci_is_wider_when_seed_variance_dominates() -> None:
    treated, baseline = _seed_dominated(seed_sd=6.0, task_sd=1.0)
    two = two_level_paired_bootstrap(treated, baseline)
    one = paired_bootstrap(seed_averaged(treated), seed_averaged(baseline))
    assert two["diff"] == pytest.approx(one["diff"])  # same point estimate
    assert (two["hi"] - two["lo"]) > 5 * (one["hi"] - one["lo"])
    assert one["lo"] > 0  # task-only: "significant"
    assert two["lo"] < 0 < two["hi"]  # the seeds say it is not
    assert two["n_seeds"] == 5 and two["resampled"] == "seeds and tasks"


def test_two_level_ci_stays_close_when_seeds_agree() -> None:
    treated, baseline = _seed_dominated(seed_sd=0.0, task_sd=3.0)
    two = two_level_paired_bootstrap(treated, baseline)
    one = paired_bootstrap(seed_averaged(treated), seed_averaged(baseline))
    width2, width1 = two["hi"] - two["lo"], one["hi"] - one["lo"]
    # no seed effect: wider only by the cell noise it counts at both levels (conservative, bounded)
    assert width1 <= width2 <= 2.5 * width1
    assert two["lo"] > 0 and one["lo"] > 0


def test_two_level_resampling_is_seeded_and_counts_drawn_cells() -> None:
    diff = np.array([[1.0, 1.0], [3.0, 3.0]])
    a, b = two_level_bootstrap_means(diff, 400, seed=3), two_level_bootstrap_means(diff, 400, seed=3)
    assert np.array_equal(a, b) and set(np.round(a, 6)) <= {1.0, 2.0, 3.0}
    assert two_level_paired_bootstrap({0: {}}, {0: {}})["diff"] is None


def test_deterministic_baseline_without_shared_seeds() -> None:
    treated = {0: {"a": 10.0, "b": 0.0}, 1: {"a": 10.0, "b": 10.0}}
    baseline = {7: {"a": 0.0, "b": 0.0}}
    out = two_level_paired_bootstrap(treated, baseline, n_boot=200)
    assert out["diff"] == pytest.approx(7.5) and out["n_seeds"] == 2 and out["n_tasks"] == 2


def _episodes(scores: list[float], tokens: int = 10) -> list[dict]:
    return [
        {"task_id": f"t{i}", "solved": s == 1.0, "score": s, "evaluator_calls": 2, "failures": 1 - int(s),
         "tokens": tokens, "retrieval_opportunities": 1, "retrieval_with_records": i % 2, "selected_uses": 1,
         "harmful_uses": 0, "helpful_uses": int(s), "decisions": 1 + i % 3, "decision_score_sum": s}
        for i, s in enumerate(scores)
    ]  # fmt: skip


def test_pooled_summaries_equal_the_summary_of_pooled_episodes() -> None:
    a, b = _episodes([1.0, 0.0, 1.0]), _episodes([0.0, 0.0, 1.0, 1.0, 0.5], tokens=3)
    for e in b:
        e["task_id"] = "b-" + e["task_id"]
    pooled, direct = pool_summaries([summarize(a), summarize(b)]), summarize(a + b)
    for key in (
        "n_tasks",
        "n_solved",
        "score",
        "decision_score",
        "decisions",
        "solve_rate",
        "total_tokens_m",
    ):
        assert pooled[key] == pytest.approx(direct[key]), key
    for key in ("evaluator_calls_per_solved", "retrieval_coverage", "harmful_use", "helpful_use"):
        assert pooled[key] == direct[key], key


def _results() -> dict:
    treated, baseline = _seed_dominated(seed_sd=6.0, task_sd=1.0, n_tasks=60)
    scores_of = {"random": baseline, "cf_memory": treated}
    two = two_level_comparisons(scores_of, ("random",))
    avg = {k: seed_averaged(v) for k, v in scores_of.items()}
    policies = {}
    for name in scores_of:
        policies[name] = {
            "label": name,
            "mean": {"score": {"mean": float(np.mean(list(avg[name].values()))), "std": 1.0}},
            "paired_ci": {"vs_random": paired_bootstrap(avg[name], avg["random"])}
            if name != "random"
            else {},
            "paired_ci_two_level": two[name],
        }
    return {"policies": policies, "snapshot": {"records": 3}, "config": {"benchmark": "SQL", "seeds": [0, 1]},
            "split": {"eval": 60}, "rotation": {"split_seeds": [0, 1]}}  # fmt: skip


def test_results_table_reports_both_intervals() -> None:
    results = _results()
    lines = "\n".join(ci_table(results, width=100))
    assert "seeds averaged per task" in lines and "seeds and tasks resampled" in lines
    assert max(len(line) for line in lines.splitlines()) <= 100
    task_only = results["policies"]["cf_memory"]["paired_ci"]["vs_random"]
    two = results["policies"]["cf_memory"]["paired_ci_two_level"]["vs_random"]
    assert f"[{task_only['lo']:+.1f}, {task_only['hi']:+.1f}]" in lines
    assert f"[{two['lo']:+.1f}, {two['hi']:+.1f}]" in lines
    md = markdown_table(results)
    assert "two-level bootstrap" in md and "pooled over split seeds 0, 1" in md
    row = {r["policy"]: r for r in results_json(results)["rows"]}["cf_memory"]
    assert row["paired_ci"] and row["paired_ci_two_level"]["vs_random"]["n_seeds"] == 5


def test_per_task_scores_by_seed() -> None:
    out = per_task_by_seed({0: _episodes([1.0, 0.0]), 3: _episodes([0.5, 1.0])})
    assert out == {0: {"t0": 100.0, "t1": 0.0}, 3: {"t0": 50.0, "t1": 100.0}}
