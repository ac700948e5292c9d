"""SPEC §8 metrics: each rate keeps its own denominator; paired rescued/broken; seed aggregation."""

from __future__ import annotations

import math

import pytest

from cm_gym.envs.metrics import EpisodeCounters, aggregate_seeds, paired, summarize


def _episode(task: str, infos: list[dict]) -> dict:
    c = EpisodeCounters(task_id=task)
    for info in infos:
        c.update({"task_id": task, **info}, reward=info.get("reward", 0.0))
    return c.as_dict()


def test_counters_accumulate_step_infos() -> None:
    ep = _episode(
        "t1",
        [
            {
                "retrieval_attempted": True,
                "retrieved": True,
                "record_id": "r1",
                "reuse_label": -1,
                "changed_by_memory": True,
                "solved": False,
                "score": 0.0,
                "evaluator_calls": 1,
                "failures": 1,
                "tokens": 300,
                "reward": -0.4,
            },
            {
                "retrieval_attempted": True,
                "retrieved": False,
                "record_id": None,
                "reuse_label": 0,
                "solved": True,
                "score": 1.0,
                "evaluator_calls": 2,
                "failures": 1,
                "tokens": 500,
                "invalid_action": True,
                "reward": 0.85,
            },
        ],
    )
    assert ep["decisions"] == 2 and ep["solved"] and ep["score"] == 1.0
    assert ep["evaluator_calls"] == 2 and ep["failures"] == 1 and ep["tokens"] == 500
    assert ep["retrieval_opportunities"] == 2 and ep["retrieval_with_records"] == 1
    assert ep["selected_uses"] == 1 and ep["harmful_uses"] == 1 and ep["helpful_uses"] == 0
    assert ep["invalid_actions"] == 1 and ep["record_ids"] == ["r1"]
    assert ep["episode_return"] == pytest.approx(0.45)


def test_no_retrieval_mode_has_no_opportunities() -> None:
    ep = _episode(
        "t",
        [
            {
                "retrieval_attempted": False,
                "retrieved": False,
                "solved": False,
                "score": 0,
                "evaluator_calls": 1,
                "failures": 1,
                "tokens": 10,
            }
        ],
    )
    s = summarize([ep])
    assert s["retrieval_coverage"] == {
        "value": None,
        "numerator": 0,
        "denominator": 0,
        "per": "retrieval opportunity",
    }


def test_summarize_keeps_denominators_apart() -> None:
    solved = _episode(
        "a",
        [
            {
                "retrieved": True,
                "record_id": "r",
                "reuse_label": 1,
                "solved": True,
                "score": 1.0,
                "evaluator_calls": 1,
                "failures": 0,
                "tokens": 1000,
            }
        ],
    )
    failed = _episode(
        "b",
        [
            {
                "retrieved": True,
                "record_id": None,
                "solved": False,
                "score": 0.5,
                "evaluator_calls": 1,
                "failures": 1,
                "tokens": 400,
            },
            {
                "retrieved": False,
                "record_id": "q",
                "reuse_label": -1,
                "solved": False,
                "score": 0.0,
                "evaluator_calls": 2,
                "failures": 2,
                "tokens": 900,
            },
        ],
    )
    s = summarize([solved, failed])
    assert s["n_tasks"] == 2 and s["n_solved"] == 1
    assert s["score"] == pytest.approx(50.0) and s["solve_rate"] == pytest.approx(50.0)
    assert s["total_tokens_m"] == pytest.approx(1900 / 1e6)
    assert (
        s["evaluator_calls_per_solved"]["value"] == 3
        and s["evaluator_calls_per_solved"]["per"] == "solved task"
    )
    assert s["failures_per_solved"]["value"] == 2
    assert s["retrieval_coverage"]["numerator"] == 2 and s["retrieval_coverage"]["denominator"] == 3
    assert s["harmful_use"]["numerator"] == 1 and s["harmful_use"]["denominator"] == 2
    assert s["helpful_use"]["value"] == 0.5


def test_per_solved_rate_is_none_without_solved_tasks() -> None:
    ep = _episode("x", [{"solved": False, "score": 0, "evaluator_calls": 3, "failures": 3, "tokens": 1}])
    assert summarize([ep])["evaluator_calls_per_solved"]["value"] is None
    assert summarize([])["score"] is None


def test_paired_rescued_and_broken() -> None:
    base = [{"task_id": t, "solved": s} for t, s in [("a", False), ("b", True), ("c", True), ("d", False)]]
    mem = [{"task_id": t, "solved": s} for t, s in [("a", True), ("b", False), ("c", True), ("e", True)]]
    p = paired(base, mem)
    assert p["n_pairs"] == 3 and p["rescued"] == 1 and p["broken"] == 1 and p["net"] == 0
    assert p["rescued_ids"] == ["a"] and p["broken_ids"] == ["b"]


def test_aggregate_seeds_mean_std_and_pooled() -> None:
    def run(score: float, harm: int, uses: int) -> dict:
        eps = [
            _episode(
                "t",
                [
                    {
                        "record_id": "r" if i < uses else None,
                        "reuse_label": -1 if i < harm else 0,
                        "solved": True,
                        "score": score,
                        "evaluator_calls": 1,
                        "failures": 0,
                        "tokens": 10,
                    }
                ],
            )
            for i in range(4)
        ]
        return summarize(eps)

    agg = aggregate_seeds([run(1.0, 1, 2), run(0.5, 0, 4)])
    assert agg["score"]["mean"] == pytest.approx(75.0)
    assert agg["score"]["std"] == pytest.approx(math.sqrt(2 * 25.0**2))
    assert agg["harmful_use"]["per_seed"] == [0.5, 0.0]
    assert agg["harmful_use"]["pooled"]["numerator"] == 1 and agg["harmful_use"]["pooled"]["denominator"] == 6
    assert agg["n_tasks"]["per_seed"] == [4, 4]


def test_worse_than_draft_uses_its_own_denominator() -> None:
    ep = _episode(
        "t",
        [
            {
                "record_id": "a",
                "draft_score": 1.0,
                "score": 0.0,
                "solved": False,
                "evaluator_calls": 1,
                "failures": 1,
                "tokens": 1,
            },
            {
                "record_id": "b",
                "draft_score": None,
                "score": 0.0,
                "solved": False,
                "evaluator_calls": 2,
                "failures": 2,
                "tokens": 2,
            },
            {
                "record_id": "c",
                "draft_score": 0.0,
                "score": 1.0,
                "solved": True,
                "evaluator_calls": 3,
                "failures": 2,
                "tokens": 3,
            },
        ],
    )
    s = summarize([ep])
    assert s["worse_than_draft"]["numerator"] == 1 and s["worse_than_draft"]["denominator"] == 2
    assert s["harmful_use"]["denominator"] == 3
    assert ep["uses_better_than_draft"] == 1


def test_paired_bootstrap_averages_seeds_per_task_and_brackets_the_difference() -> None:
    from cm_gym.envs.metrics import paired_bootstrap, paired_comparisons, per_task

    def eps(scores: list[float]) -> list[dict]:
        return [{"task_id": f"t{i}", "score": s} for i, s in enumerate(scores)]

    a = [1.0] * 30 + [0.0] * 10
    runs = {
        "policy": {0: eps(a), 1: eps([1.0] * 40)},
        "random": {0: eps([1.0] * 20 + [0.0] * 20)},
    }
    tasks = per_task(list(runs["policy"].values()))
    assert tasks["t0"] == 100.0 and tasks["t35"] == 50.0  # seeds averaged per task (0 and 100)
    ci = paired_bootstrap(tasks, per_task(list(runs["random"].values())))
    assert ci["n_tasks"] == 40 and ci["diff"] == pytest.approx((10 * 100 + 10 * 50) / 40)
    assert ci["lo"] < ci["diff"] < ci["hi"] and ci["lo"] > 0
    same = paired_bootstrap(tasks, tasks)
    assert same["diff"] == same["lo"] == same["hi"] == 0.0
    comparisons = paired_comparisons(runs, ("random",))
    assert set(comparisons["policy"]) == {"vs_random"} and comparisons["random"] == {}


def test_decision_score_counts_every_executed_action() -> None:
    c = EpisodeCounters()
    c.update({"task_id": "t", "score": 0.0, "solved": False})
    c.update({"task_id": "t", "score": 1.0, "solved": True})
    s = summarize([c.as_dict()])
    assert s["score"] == 100.0 and s["decision_score"] == 50.0 and s["decisions"] == 2
