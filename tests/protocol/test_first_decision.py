"""The first-decision score beside the budget score (issue 32): counted per episode, summarised,
pooled, shown in every results table that carries it; the recorded cascade's memory-free row is
labelled "Cascade", never "None"."""

from __future__ import annotations

from typing import Any

from cm_gym.envs.metrics import EpisodeCounters, aggregate_seeds, pool_summaries, summarize
from cm_gym.protocol.config import CASCADE_LABEL, policy_label
from cm_gym.protocol.report import markdown_table, results_json, results_table


def _episode(task: str, scores: list[float]) -> dict[str, Any]:
    counters = EpisodeCounters()
    for s in scores:
        counters.update({"task_id": task, "score": s, "solved": s == 1.0})
    return counters.as_dict()


def test_the_first_decision_score_counts_only_each_tasks_first_action() -> None:
    episodes = [
        _episode("a", [0.0, 1.0]),
        _episode("b", [1.0]),
        _episode("c", [0.0, 0.0, 1.0]),
        _episode("d", [0.0, 0.0]),
    ]
    summary = summarize(episodes)
    assert summary["score"] == 75.0 and summary["first_decision_score"] == 25.0
    assert summary["n_first_solved"] == 1 and summary["n_solved"] == 3
    old = [{k: v for k, v in e.items() if k not in ("first_score", "first_solved")} for e in episodes]
    assert summarize(old)["first_decision_score"] is None  # episodes written before the metric: no fake 0
    pooled = pool_summaries([summarize(episodes[:1]), summarize(episodes[1:])])
    assert pooled["first_decision_score"] == 25.0
    assert aggregate_seeds([summary, summary])["first_decision_score"]["mean"] == 25.0


def _results(llm: str) -> dict[str, Any]:
    summary = summarize([_episode("a", [0.0, 1.0]), _episode("b", [1.0])])
    mean = aggregate_seeds([summary])
    return {
        "config": {"benchmark": "SpiderSQL", "seeds": [0], "llm": llm},
        "split": {"eval": 2},
        "snapshot": {"records": 0},
        "policies": {"none": {"label": policy_label("none", llm=llm), "mean": mean}},
    }


def test_tables_show_the_first_decision_beside_the_score_and_name_the_cascade() -> None:
    plain, cascade = _results("recorded:gpt-4-zero-shot"), _results("recorded:gpt-4-zero-shot+cascade")
    assert plain["policies"]["none"]["label"].startswith("None")
    assert cascade["policies"]["none"]["label"] == CASCADE_LABEL and "None" not in CASCADE_LABEL
    md = markdown_table(plain).splitlines()
    assert md[0].startswith("| Policy | Score | First decision |") and "| 100.0 | 50.0 |" in md[2]
    text = results_table(cascade, width=100)
    assert "Cascade" in text and max(map(len, text.splitlines())) <= 100
    row = results_json(plain)["rows"][0]
    assert row["first_decision_score"]["mean"] == 50.0 and row["score"]["mean"] == 100.0
    del plain["policies"]["none"]["mean"]["first_decision_score"]  # an old results.json
    assert "First decision" not in markdown_table(plain)
