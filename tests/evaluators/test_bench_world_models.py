"""`bench/bench_world_models.py` (issue 35): the SQL predictions' CPU split by kind of answer, and
each kind timed in a pass of its own."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import pytest

from cm_gym.core.types import Task

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_world_models.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_world_models", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_world_models", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_kind_split_sums_each_kinds_inputs_and_rounds() -> None:
    bench = _bench()
    row = bench.Row("SQL", "f", 4, raw_cpu=[1.0, 1.0], ours_cpu=[2.0, 2.0])
    row.per_input = [("a", 3.0, 1.0), ("b", 1.0, 1.0), ("c", 5.0, 2.0), ("d", 0.5, 0.5)]
    row.kinds = ["compared", "identical rows", "compared", "error"]
    assert bench.kind_split(row) == [
        ("compared", 2, 8.0, 3.0),
        ("identical rows", 1, 1.0, 1.0),
        ("error", 1, 0.5, 0.5),
    ]
    row.kinds = ["x"]
    with pytest.raises(ValueError):  # a label per input, or none
        bench.kind_split(row)


def test_sql_kind_tells_identical_compared_and_failing_answers_apart(tmp_path: Path) -> None:
    db = tmp_path / "k.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE t(a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y');")
    task = Task(
        "k-0", "sql", "q", "k", "SELECT a, b FROM t", context="", features={}, meta={"db_path": str(db)}
    )
    kind = _bench().sql_kind
    assert kind(task, "SELECT a, b FROM t") == "identical rows"
    assert kind(task, "SELECT a, b FROM t ORDER BY a DESC") == "compared"  # the same rows, another order
    assert kind(task, "SELECT b, a FROM t") == "compared"
    assert kind(task, "SELECT a FROM t WHERE 0") == "compared"  # empty, one column against two
    assert kind(task, "SELECT nope FROM t") == "error"
    assert kind(task, "SELECT 1; SELECT 2") == "error"


@pytest.mark.data
def test_sql_predictions_are_split_by_kind_and_timed_alone(
    shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not (shared_data / "llm-outputs" / "spider" / "predictions.jsonl").is_file():
        pytest.skip("no Spider predictions in the shared data")
    bench = _bench()
    assert bench.main(["--only", "sql", "--sql-limit", "40", "--rounds", "1", "--split-kinds"]) == 0
    out = capsys.readouterr().out
    split = [line.split() for line in out.splitlines() if line.startswith("      ") and ":" in line]
    kinds = {" ".join(parts[:-4]).rstrip(":"): int(parts[-4]) for parts in split}
    assert set(kinds) <= set(bench.SQL_KINDS) and "identical rows" in kinds
    predictions = next(line for line in out.splitlines() if "spider gpt-4" in line)
    assert sum(kinds.values()) == int(predictions.split()[3])  # every prediction has one kind
    for kind in kinds:
        assert f"SQL {kind}, alone" in out
