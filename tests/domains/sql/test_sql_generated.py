"""The generated SQL benchmark: size, determinism, atomic database builds, gold queries, look-alikes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql import families, generated, schemas
from cm_gym.domains.sql.evaluator import SQLEvaluator


def test_benchmark_size_ids_and_fields(gen_tasks: list[Task]) -> None:
    assert len(gen_tasks) >= 600
    ids = [t.task_id for t in gen_tasks]
    assert (
        len(set(ids)) == len(ids) and ids[0] == "sqlgen-00000" and all(i.startswith("sqlgen-") for i in ids)
    )
    assert {t.family for t in gen_tasks} == set(families.FAMILIES)
    assert {t.env_id for t in gen_tasks} == set(schemas.DATABASES)
    assert len({t.prompt for t in gen_tasks}) == len(gen_tasks)
    for task in gen_tasks:
        assert task.domain == "sql" and task.features["family"] == task.family
        assert 0 < len(task.context) <= 3000 and task.context.startswith(f"Database: {task.env_id}")
        assert "Foreign keys:" in task.context
        json.dumps(dict(task.features))  # JSON-serialisable
        assert Path(task.meta["db_path"]).is_file()


def test_every_gold_query_executes_and_is_correct(gen_tasks: list[Task]) -> None:
    evaluator = SQLEvaluator()
    for task in gen_tasks:
        outcome = evaluator.check(AgentState(task), Action(task.reference))
        assert outcome.solved, (task.task_id, task.reference, outcome.reason)
        assert outcome.details["rows"] > 0


def test_lookalike_pairs_have_different_answers(gen_tasks: list[Task]) -> None:
    evaluator = SQLEvaluator()
    pairs: dict[str, list[Task]] = defaultdict(list)
    for task in gen_tasks:
        if task.meta["pair"]:
            pairs[task.meta["pair"]].append(task)
    assert len(pairs) >= 250
    for a, b in pairs.values():
        assert a.family == b.family and a.env_id == b.env_id and a.meta["variant"] != b.meta["variant"]
        assert not evaluator.check(AgentState(a), Action(b.reference)).solved, (a.prompt, b.prompt)
        assert not evaluator.check(AgentState(b), Action(a.reference)).solved


def test_boundary_wording_and_thresholds(gen_tasks: list[Task]) -> None:
    """Inclusive and strict readings differ: the threshold value occurs in the data."""
    for task in gen_tasks:
        if task.family.startswith("boundary") or task.family == "group_having":
            assert task.features["boundary"] == task.meta["variant"], task.prompt
    ops = {"boundary_lower": (">=", ">"), "boundary_upper": ("<=", "<")}
    checked = 0
    for task in gen_tasks:
        if task.family in ops and task.meta["variant"] == "inclusive":
            inclusive, strict = ops[task.family]
            where = task.reference.split(" WHERE ", 1)[1]
            column, value = where.split(f" {inclusive} ")
            conn = sqlite3.connect(Path(task.meta["db_path"]).resolve().as_uri() + "?mode=ro", uri=True)
            table = task.reference.split(" FROM ")[1].split()[0]
            assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = {value}").fetchone()[0] > 0
            conn.close()
            checked += 1
    assert checked >= 50


def test_features_reflect_structure(gen_tasks: list[Task]) -> None:
    by_family: dict[str, list[Task]] = defaultdict(list)
    for task in gen_tasks:
        by_family[task.family].append(task)
    assert all(t.features["has_distinct"] for t in by_family["boundary_join"])
    assert all(t.features["has_join"] for t in by_family["join_key"])
    assert all(t.features["has_limit"] and t.features["has_order"] for t in by_family["topk"])
    assert all(t.features["has_null_check"] for t in by_family["null_check"])
    assert all(t.features["order_dir"] == t.meta["variant"].upper() for t in by_family["order"])
    assert all(t.features["order_wording"] == t.meta["variant"] for t in by_family["topk"])
    assert all(
        t.features["mentions_unique"] == (t.meta["variant"] == "distinct") for t in by_family["distinct"]
    )


def test_generation_is_deterministic_per_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    first = generated.generate(seed=3, n_tasks=40)
    assert generated.generate(seed=3, n_tasks=40) == first
    assert generated.generate(seed=4, n_tasks=40) != first
    assert len(first) == 40


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_databases_are_built_atomically_and_deterministically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "a"))
    path_a = schemas.ensure_database("shop", seed=0)
    assert f"-{schemas.DB_VERSION}-s0" in path_a.name
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "b"))
    path_b = schemas.ensure_database("shop", seed=0)
    assert _sha(path_a) == _sha(path_b)
    assert [p.name for p in path_b.parent.iterdir()] == [path_b.name]  # no temp files left behind
    path_b.write_bytes(b"truncated garbage")  # a corrupt cache file is rebuilt, not trusted
    assert _sha(schemas.ensure_database("shop", seed=0)) == _sha(path_a)
    conn = sqlite3.connect(path_a)
    assert conn.execute("SELECT COUNT(*) FROM orders WHERE shipped_date IS NULL").fetchone()[0] > 0
    assert conn.execute("SELECT COUNT(*) FROM pragma_foreign_key_list('orders')").fetchone()[0] == 2
    conn.close()
    with pytest.raises(schemas.SQLDataError):
        schemas.ensure_database("nope")


def test_task_cache_roundtrip_and_corrupt_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    fresh = generated.load_tasks(seed=0, n_tasks=30)
    cache = generated._cache_path(0, 30)
    assert cache.is_file()
    again = generated.load_tasks(seed=0, n_tasks=30)
    assert [(t.task_id, t.prompt, t.reference, dict(t.features)) for t in again] == [
        (t.task_id, t.prompt, t.reference, dict(t.features)) for t in fresh
    ]
    cache.write_text("{not json", encoding="utf-8")
    rebuilt = generated.load_tasks(seed=0, n_tasks=30)
    assert [t.reference for t in rebuilt] == [t.reference for t in fresh]
    with pytest.raises(ValueError):
        generated.load_tasks(n_tasks=1)
