"""The results table in text wraps policy names instead of cutting them (issue 36): both CF Memory
rows keep their full names at any width, every number stays, Markdown and JSON are unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cm_gym.protocol.config import POLICY_LABELS
from cm_gym.protocol.report import ci_table, markdown_table, results_table

NAMES = ("none", "top1", "random", "cf_memory", "cf_memory_extended", "oracle")


def _results() -> dict[str, Any]:
    policies = {}
    for i, name in enumerate(NAMES):
        mean = {
            "score": {"mean": 80.0 + i + 0.25, "std": 1.0 + i / 10},
            "first_decision_score": {"mean": 70.0 + i, "std": 0.5},
            "decision_score": {"mean": 55.0 + i, "std": 0.3},
            "total_tokens_m": {"mean": 0.3 + i / 100, "std": 0.01},
            "evaluator_calls_per_solved": {"mean": 1.5 + i / 10, "std": 0.02},
            "failures_per_solved": {"mean": 0.5 + i / 10, "std": 0.02},
            "retrieval_coverage": {"mean": 0.2 + i / 100, "std": 0.01},
            "harmful_use": {"mean": 0.05 + i / 100, "std": 0.01} if i else {"mean": None, "std": None},
            "helpful_use": {"mean": 0.1 + i / 100, "std": 0.01} if i else {"mean": None, "std": None},
        }
        ci = {
            "vs_random": {"diff": i - 2.0, "lo": i - 3.5, "hi": i - 0.5},
            "vs_top1": {"diff": i - 1.0, "lo": i - 2.5, "hi": i + 0.5},
        }
        policies[name] = {"label": POLICY_LABELS[name], "mean": mean, "paired_ci": ci}
    return {"config": {"benchmark": "SQL", "seeds": [0, 1, 2, 3, 4]}, "split": {"eval": 240},
            "snapshot": {"records": 50}, "policies": policies}  # fmt: skip


def _names(text: str) -> list[str]:
    """The main table's first column, each wrapped name joined back: rows are one line each, or
    blank-line apart where cells wrap."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) <= {"-", " "})
    w0 = len(lines[rule].split(" ")[0])
    end = next(i for i, line in enumerate(lines) if line.startswith("benchmark "))
    body = lines[rule + 1 : end - 1]
    if "" not in body:
        return [line[:w0].strip() for line in body]
    blocks: list[list[str]] = [[]]
    for line in body:
        if line:
            blocks[-1].append(line[:w0].strip())
        else:
            blocks.append([])
    return [" ".join(part for part in block if part) for block in blocks]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_both_cf_memory_rows_keep_their_full_names(width: int) -> None:
    results = _results()
    text = results_table(results, width=width)
    assert "…" not in text and max(map(len, text.splitlines())) <= width
    assert _names(text) == [POLICY_LABELS[n] for n in NAMES]
    ci = "\n".join(ci_table(results, width=width))
    for name in ("cf_memory", "cf_memory_extended"):
        assert sum(line.startswith(POLICY_LABELS[name] + " ") for line in ci.splitlines()) == 1


@pytest.mark.parametrize("width", [80, 120])
def test_every_number_of_the_table_is_still_there(width: int) -> None:
    results = _results()
    text = results_table(results, width=width)
    words = " ".join(text.split())
    for res in results["policies"].values():
        m = res["mean"]
        assert f"{m['score']['mean']:.1f}" in words and f"± {m['score']['std']:.1f}" in words
        for key, fmt in (("first_decision_score", "{:.1f}"), ("decision_score", "{:.1f}"),
                         ("total_tokens_m", "{:.3f}"), ("evaluator_calls_per_solved", "{:.2f}"),
                         ("failures_per_solved", "{:.2f}"), ("retrieval_coverage", "{:.1%}"),
                         ("harmful_use", "{:.1%}"), ("helpful_use", "{:.1%}")):  # fmt: skip
            if m[key]["mean"] is not None:
                assert fmt.format(m[key]["mean"]) in words, key
        for c in res["paired_ci"].values():
            assert f"{c['diff']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}]" in words
    if width < 100:  # short headers, explained under the table
        assert "Calls/sol = Calls/solved" in words


def test_markdown_and_json_are_unchanged() -> None:
    results = _results()
    md = results_table(results, "markdown")
    assert md == markdown_table(results)
    assert md.splitlines()[0] == (
        "| Policy | Score | First decision | Score/decision | Tokens (M) | Calls/solved | Fails/solved "
        "| Coverage | Harmful use | Helpful use |"
    )
    assert (
        "| CF Memory (masked DQN, extended z_t) | 84.2 ± 1.4 | 74.0 ± 0.5 | 59.0 ± 0.3 | 0.340 ± 0.010 "
        "| 1.90 ± 0.02 | 0.90 ± 0.02 | 24.0% ± 1.0 | 9.0% ± 1.0 | 14.0% ± 1.0 |"
    ) in md.splitlines()
    assert "| CF Memory (masked DQN) | +1.0 [-0.5, +2.5] | +2.0 [+0.5, +3.5] |" in md.splitlines()
    rows = json.loads(results_table(results, "json"))["rows"]
    assert [r["label"] for r in rows] == [POLICY_LABELS[n] for n in NAMES]
