"""The Spider-layout loader and the world model on the shared real Spider subset."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.sql import load_spider_tasks
from cm_gym.domains.sql.evaluator import SQLEvaluator
from cm_gym.domains.sql.schema import SQLDataError

pytestmark = pytest.mark.data

HOSTILE = (
    "DROP TABLE singer",
    "DELETE FROM singer",
    "WITH x AS (SELECT 1) UPDATE singer SET Age = 0",
    "ATTACH DATABASE '/tmp/x.db' AS x",
    "PRAGMA user_version = 3",
    "SELECT 1; DROP TABLE singer",
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
)


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def test_loads_every_task_and_every_gold_is_correct_against_itself(shared_data: Path) -> None:
    root = shared_data / "spider"
    before = _tree_hash(root)
    tasks = load_spider_tasks(root=root)
    assert len(tasks) == len(json.loads((root / "dev.json").read_text()))
    assert tasks[0].task_id == "spider-0000" and len({t.task_id for t in tasks}) == len(tasks)
    assert {t.env_id for t in tasks} == {p.name for p in (root / "database").iterdir() if p.is_dir()}
    for task in tasks:
        assert 0 < len(task.context) <= 3000 and task.meta["immutable"] is True
        assert task.features["family"] and "boundary" in task.features
    evaluator = SQLEvaluator()
    wrong = [t.task_id for t in tasks if not evaluator.check(AgentState(t), Action(t.reference)).solved]
    assert wrong == []
    # hostile queries against a real database, then the whole data folder is byte-for-byte unchanged
    singer = next(t for t in tasks if t.env_id == "singer")
    hostile = SQLEvaluator(step_budget=1_000_000)
    for sql in HOSTILE:
        outcome = hostile.check(AgentState(singer), Action(sql))
        assert outcome.score == 0.0 and outcome.status in ("refused", "error", "budget")
    hostile.close()
    evaluator.close()
    assert _tree_hash(root) == before


def _copy_layout(shared_data: Path, tmp_path: Path, db: str = "concert_singer") -> Path:
    src = shared_data / "spider"
    root = tmp_path / "spider"
    (root / "database").mkdir(parents=True)
    shutil.copytree(src / "database" / db, root / "database" / db)
    shutil.copy(src / "tables.json", root / "tables.json")
    entries = [e for e in json.loads((src / "dev.json").read_text()) if e["db_id"] == db][:5]
    (root / "dev.json").write_text(json.dumps(entries))
    return root


def test_loader_on_a_copied_layout_and_without_tables_json(shared_data: Path, tmp_path: Path) -> None:
    root = _copy_layout(shared_data, tmp_path)
    tasks = load_spider_tasks(root=root)
    assert len(tasks) == 5 and all(t.env_id == "concert_singer" for t in tasks)
    (root / "tables.json").unlink()
    introspected = load_spider_tasks(root=root, files=("dev.json",))
    assert "singer(" in introspected[0].context  # schema read from the database itself
    assert SQLEvaluator().check(AgentState(introspected[0]), Action(introspected[0].reference)).solved


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: (r / "dev.json").write_text('[{"db_id": "concert_singer", '), "malformed JSON"),
        (lambda r: (r / "dev.json").write_bytes(b"\xff\xfe\x00garbage"), "not UTF-8"),
        (lambda r: (r / "dev.json").write_text('{"a": 1}'), "expected a JSON list"),
        (lambda r: (r / "dev.json").write_text('[{"db_id": "concert_singer", "question": "q"}]'), "'query'"),
        (
            lambda r: (r / "dev.json").write_text(
                '[{"db_id": "atlantis", "question": "q", "query": "SELECT 1"}]'
            ),
            "unknown db_id 'atlantis'",
        ),
        (
            lambda r: (r / "database" / "concert_singer" / "concert_singer.sqlite").write_bytes(
                b"not sqlite" * 200
            ),
            "not a readable SQLite",
        ),
        (lambda r: (r / "tables.json").write_text("[1, 2]"), "tables.json"),
        (lambda r: (r / "dev.json").unlink(), "file not found"),
    ],
)
def test_loader_bad_input_gives_one_clear_error(
    shared_data: Path, tmp_path: Path, mutate, message: str
) -> None:
    root = _copy_layout(shared_data, tmp_path)
    mutate(root)
    with pytest.raises(SQLDataError, match=message) as info:
        load_spider_tasks(root=root)
    assert str(root) in str(info.value)  # names the file


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SQLDataError, match="not found"):
        load_spider_tasks(root=tmp_path / "nowhere")
