"""Fixtures of the SQL-domain tests: a tiny hand-made database, task construction, and the
generated benchmark (built once per session into the session's cache dir)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.sql import load_generated_tasks

TINY_DDL = """
CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, city TEXT, score REAL, boss_id INTEGER);
INSERT INTO people VALUES
  (1, 'Ann', 17, 'Oslo', 1.5, NULL), (2, 'Bob', 18, 'Oslo', 2.25, 1), (3, 'Cid', 18, 'Bern', NULL, 1),
  (4, 'Dee', 30, 'Bern', 3.0, 2), (5, 'Eve', 45, 'Graz', 0.1, NULL), (6, 'Fay', 52, 'Oslo', 0.2, 4);
CREATE TABLE pets (pet_id INTEGER PRIMARY KEY, owner_id INTEGER REFERENCES people(id), kind TEXT, weight REAL);
INSERT INTO pets VALUES (1, 1, 'cat', 4.0), (2, 1, 'dog', 12.5), (3, 4, 'cat', 3.5), (4, 6, 'fish', 0.1);
"""


@pytest.fixture(autouse=True)
def _no_work_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests here count what runs: the persistent work memo (`cm_gym.core.workmemo`) would answer
    a query another test already checked on an identical database. Its own tests turn it on."""
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "0")


@pytest.fixture
def memo_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The work memo on, in an empty cache folder of this test (returned)."""
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    return tmp_path / "cache"


def overwrite_stored_values(path: Path, value: str) -> None:
    """Replace every value of a closed work-memo file by `value` (an SQL literal)."""
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE memo SET value = {value}")
    conn.commit()
    conn.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def tiny_db(tmp_path: Path) -> Path:
    """A small database with duplicates, NULLs, floats and a foreign key."""
    path = tmp_path / "tiny.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(TINY_DDL)
    conn.commit()
    conn.close()
    return path


TaskFactory = Callable[..., Task]


@pytest.fixture
def make_task(tiny_db: Path) -> TaskFactory:
    """Build a Task on the tiny database (or on `db_path`)."""

    def make(reference: str, prompt: str = "q", db_path: Path | None = None, **meta: Any) -> Task:
        features = {
            "column_types": {
                "people.id": "number", "people.name": "text", "people.age": "number", "people.city": "text",
                "people.score": "number", "people.boss_id": "number", "pets.pet_id": "number",
                "pets.owner_id": "number", "pets.kind": "text", "pets.weight": "number",
            }
        }  # fmt: skip
        info = {"db_path": str(db_path or tiny_db), "immutable": False, **meta}
        return Task("tiny-0", "sql", prompt, "tiny", reference, context="", features=features, meta=info)

    return make


@pytest.fixture(scope="session")
def gen_tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    """The default generated benchmark (seed 0), built in the run's cache dir (the same one the
    top-level conftest isolates function-scoped tests into)."""
    cache = os.environ.get("CM_GYM_CACHE") or str(tmp_path_factory.getbasetemp() / "cm_gym_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CM_GYM_CACHE", cache)
        return load_generated_tasks()
