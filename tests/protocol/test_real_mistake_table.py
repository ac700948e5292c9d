"""`bench/real_mistake_table.py` (issue 32's README table) reads every column from the right place.

The fixture has the structure of a real `cm-gym run --llm recorded:gpt-4-zero-shot` results.json
(keys, nesting, store schema, build summary), trimmed to four held-out tasks and two seeds, with a
different value in every column, so a cell read from the wrong policy, key or run fails."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "real_mistake_table.py"
TASKS = ("spider-0001", "spider-0002", "spider-0003", "spider-0004")


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("real_mistake_table", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _policy(score: float, first: float, per_task: dict[int, list[float]], **extra) -> dict:
    def stat(value: float) -> dict:
        return {"mean": value, "std": 0.0, "n": len(per_task), "per_seed": [value] * len(per_task)}

    return {
        "label": "x",
        "layout": None,
        "mean": {
            "score": stat(score),
            "first_decision_score": stat(first),
            "retrieval_coverage": {
                "mean": 0.5,
                "pooled": {"value": extra.pop("coverage", 0.25), "numerator": 1, "denominator": 4},
            },
        },
        "per_task_scores": {str(s): dict(zip(TASKS, v, strict=True)) for s, v in per_task.items()},
        **extra,
    }


def _ci(diff: float, lo: float, hi: float) -> dict:
    return {"diff": diff, "lo": lo, "hi": hi, "n_tasks": 4, "n_seeds": 2, "resampled": "seeds and tasks"}


def _write_run(
    root: Path,
    llm: str,
    kind: str,
    policies: dict,
    records: list[tuple[str, str, str]],
    refused: int | None = 10,
) -> Path:
    run = root / f"{llm.replace(':', '-')}-{kind}"
    (run / "memory").mkdir(parents=True)
    store = run / "memory" / "snapshot.sqlite"
    with sqlite3.connect(store) as db:
        db.execute(
            "CREATE TABLE records (record_id TEXT PRIMARY KEY, contrast_key TEXT NOT NULL, "
            "a_minus_provenance TEXT NOT NULL DEFAULT 'unknown', a_plus_provenance TEXT NOT NULL DEFAULT 'unknown')"
        )
        db.executemany(
            "INSERT INTO records VALUES (?, ?, ?, ?)", [(str(i), *r) for i, r in enumerate(records)]
        )
    prov_minus: dict[str, int] = {}
    prov_plus: dict[str, int] = {}
    for _, m, p in records:
        prov_minus[m] = prov_minus.get(m, 0) + 1
        prov_plus[p] = prov_plus.get(p, 0) + 1
    results = {
        "config": {"llm": llm, "seeds": [0, 1], "total_decisions": 600},
        "split": {
            "build": 131,
            "train": 99,
            "validation": 50,
            "eval": len(TASKS),
            "kind": kind,
            "seed": 12345,
        },
        "snapshot": {
            "path": str(store),
            "records": len(records),
            "provenance": {"a_minus": prov_minus, "a_plus": prov_plus},
        },
        "policies": policies,
        "llm": {"replies": {"real": 9601, "simulated": 2606}},
    }
    (run / "results.json").write_text(json.dumps(results))
    rejected = {"not_improved": 132} | ({} if refused is None else {"a_minus_not_real": refused})
    (run / "memory" / "build_summary.json").write_text(json.dumps({"rejected": rejected}))
    return run


def _main_policies() -> dict:
    none_tasks = {0: [100.0, 0.0, 0.0, 100.0], 1: [100.0, 0.0, 0.0, 100.0]}
    oracle_tasks = {0: [100.0, 100.0, 0.0, 100.0], 1: [100.0, 100.0, 0.0, 100.0]}  # rescues spider-0002
    return {
        "none": _policy(50.0, 40.0, none_tasks, coverage=0.875),
        "top1": _policy(
            51.0,
            41.0,
            none_tasks,
            paired_vs_none=[{"rescued_ids": ["spider-0003"], "broken_ids": ["spider-0004"]}],
        ),
        "random": _policy(52.0, 42.0, none_tasks),
        "cf_memory": _policy(
            53.0,
            43.0,
            none_tasks,
            paired_ci_two_level={"vs_random": _ci(-1.0, -2.0, 0.0), "vs_top1": _ci(-3.0, -4.0, 0.5)},
        ),
        "cf_memory_extended": _policy(
            54.0,
            44.0,
            none_tasks,
            paired_ci_two_level={"vs_random": _ci(1.5, 0.5, 2.5), "vs_top1": _ci(2.0, 1.0, 3.0)},
        ),
        "oracle": _policy(
            75.0, 45.0, oracle_tasks, paired_vs_none=[{"rescued_ids": ["spider-0002"], "broken_ids": []}] * 2
        ),
    }


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_every_column_comes_from_its_own_place(tmp_path: Path, table) -> None:
    main = _write_run(
        tmp_path,
        "recorded:gpt-4-zero-shot",
        "sampled",
        _main_policies(),
        [
            ("agg:COUNT->SUM", "real", "simulated"),
            ("cmp:EQ->NEQ", "real", "simulated"),
            ("cmp:LT->GT", "real", "edit"),
        ],
    )
    none_only = {"none": _policy(60.0, 41.5, {0: [100.0, 100.0, 0.0, 100.0]})}
    cascade = _write_run(tmp_path, "recorded:gpt-4-zero-shot+cascade", "sampled", none_only, [])
    other = _write_run(
        tmp_path,
        "recorded:gpt-4-zero-shot+cascade",
        "environments",
        {"none": _policy(99.0, 98.0, {0: [0.0] * 4})},
        [],
    )
    text = table.tables([main, cascade, other])
    lines = text.splitlines()
    header = _cells(lines[0])
    rows = [line for line in lines if line.startswith("| `recorded:")]
    assert len(rows) == 2  # one main row (the cascade runs are columns, not rows), one detail row
    row = dict(zip(header, _cells(rows[0]), strict=True))
    assert row["system"] == "`recorded:gpt-4-zero-shot`"
    assert row["split"] == "paper's (tasks by seed)"
    assert row["held-out"] == "4"
    assert row["records (kinds; a⁻/a⁺)"] == "3 (cmp 2, agg 1; a⁻/a⁺ real / edit 1+simulated 2)"
    assert row["coverage"] == "88%"  # None's pooled coverage, not another policy's mean
    assert row["None, 1st decision"] == "40.0"
    assert row["None"] == "50.0"
    assert row["Cascade (1st / budget)"] == "41.5 / 60.0"  # the cascade run of the same split
    assert row["Top-1"] == "51.0"
    assert row["Random"] == "52.0"
    assert row["CF Memory"] == "53.0"
    assert row["CF Memory (ext.)"] == "54.0"
    assert row["Oracle"] == "75.0"
    assert row["CF − Random"] == "−1.0 [−2.0, +0.0]"
    assert row["CF − Top-1"] == "−3.0 [−4.0, +0.5]"
    # oracle − None from the per-task scores: +25 (one of four tasks), one task rescued
    assert row["Oracle − None"].startswith("+25.0 [") and row["Oracle − None"].endswith("(1 task)")

    detail_header = _cells(lines[lines.index("") + 1])
    detail = dict(zip(detail_header, _cells(rows[1]), strict=True))
    assert detail["build / train / eval"] == "131 / 99 / 4"
    assert detail["seeds × decisions"] == "2 × 600"
    assert detail["contrasts"] == "`agg:COUNT->SUM`, `cmp:EQ->NEQ`, `cmp:LT->GT`"
    assert detail["refused (a⁻ not real)"] == "10"
    assert detail["CF (ext.) − Random"] == "+1.5 [+0.5, +2.5]"
    assert detail["CF (ext.) − Top-1"] == "+2.0 [+1.0, +3.0]"
    assert detail["Top-1 rescues / breaks"] == "`spider-0003` / `spider-0004`"
    assert detail["Oracle rescues"] == "`spider-0002`"
    assert detail["replies real / simulated"] == "9,601 / 2,606"


def test_no_cascade_run_leaves_the_column_empty(tmp_path: Path, table) -> None:
    main = _write_run(tmp_path, "recorded:codex-din-sql", "environments", _main_policies(), [], refused=None)
    lines = table.tables([main]).splitlines()
    row = dict(zip(_cells(lines[0]), _cells(lines[2]), strict=True))
    assert row["split"] == "databases apart"
    assert row["Cascade (1st / budget)"] == "—"
    assert row["records (kinds; a⁻/a⁺)"] == "0"
    detail = dict(zip(_cells(lines[4]), _cells(lines[6]), strict=True))
    assert detail["refused (a⁻ not real)"] == "0"  # the build counted no such refusal
