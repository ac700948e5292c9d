"""The SQL sandbox: hostile queries are refused or stopped, and the database file never changes."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql._engine import PROGRESS_STEPS, Box
from cm_gym.domains.sql.evaluator import SQLEvaluator

TaskFactory = Callable[..., Task]

HOSTILE = [
    "DROP TABLE people",
    "INSERT INTO people VALUES (9, 'Zed', 1, 'X', 0, NULL)",
    "UPDATE people SET age = 0",
    "DELETE FROM people",
    "CREATE TABLE evil (a)",
    "ALTER TABLE people ADD COLUMN x",
    "ATTACH DATABASE ':memory:' AS other",
    "DETACH DATABASE main",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = WAL",
    "VACUUM",
    "BEGIN IMMEDIATE",
    "REINDEX",
    "WITH x AS (SELECT 1) DELETE FROM people",
    "WITH x AS (SELECT 1) INSERT INTO people SELECT * FROM people",
    "SELECT load_extension('/tmp/nowhere.so')",
    "SELECT 1; DROP TABLE people",
    "SELECT name FROM people; DELETE FROM people",
]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_query_is_refused_with_score_zero(make_task: TaskFactory, sql: str) -> None:
    outcome = SQLEvaluator().check(AgentState(make_task("SELECT name FROM people")), Action(sql))
    assert outcome.score == 0.0 and not outcome.solved
    assert outcome.status in ("refused", "error")
    assert outcome.reason


def test_write_statements_are_refused_not_errors(make_task: TaskFactory) -> None:
    evaluator = SQLEvaluator()
    state = AgentState(make_task("SELECT name FROM people"))
    for sql in (
        "DROP TABLE people",
        "PRAGMA user_version = 7",
        "ATTACH DATABASE 'x.db' AS x",
        "VACUUM INTO '/tmp/copy.db'",
    ):
        assert evaluator.check(state, Action(sql)).status == "refused"
    cte = evaluator.check(state, Action("WITH x AS (SELECT 1) DELETE FROM people"))
    assert cte.status == "refused" and "DELETE" in cte.reason
    ext = evaluator.check(state, Action("SELECT load_extension('/tmp/nowhere.so')"))
    assert ext.status == "refused" and "load_extension" in ext.reason


def test_authorizer_denies_writes_even_past_the_keyword_gate(tiny_db: Path) -> None:
    box = Box(str(tiny_db), immutable=False, progress_steps=1000)
    try:
        for sql in (
            "ATTACH DATABASE ':memory:' AS m",
            "PRAGMA user_version = 3",
            "PRAGMA table_info(people)",
            "CREATE TEMP TABLE t (a)",
            "INSERT INTO people (id) VALUES (99)",
            "DROP TABLE pets",
        ):
            with pytest.raises(sqlite3.DatabaseError):
                box.conn.execute(sql)
            assert "not allowed" in box.denied
        assert box.conn.execute("SELECT count(*) FROM people").fetchone() == (6,)
    finally:
        box.close()


def test_runaway_recursive_cte_hits_the_step_budget(make_task: TaskFactory) -> None:
    evaluator = SQLEvaluator(step_budget=2_000_000)
    state = AgentState(make_task("SELECT name FROM people"))
    runaway = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    outcome = evaluator.check(state, Action(runaway))
    assert outcome.status == "budget" and outcome.score == 0.0
    assert "2,000,000 SQLite virtual-machine steps" in outcome.reason
    assert outcome.details["budget_kind"] == "sqlite-vm-steps" and outcome.details["budget_used"] > 2_000_000
    # the same count on every run (it does not depend on the machine's load), and the connection
    # is still usable afterwards
    assert evaluator.check(state, Action(runaway)).details["budget_used"] == outcome.details["budget_used"]
    assert evaluator.check(state, Action("SELECT name FROM people")).solved


def test_steps_are_counted_and_identical_in_process_and_in_the_worker(make_task: TaskFactory) -> None:
    state = AgentState(make_task("SELECT name FROM people"))
    sql = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 3000) SELECT sum(i) FROM r"
    )
    auto = SQLEvaluator(isolation="none", step_budget=10_000_000)
    worker = SQLEvaluator(isolation="worker", step_budget=10_000_000)
    a, w = auto.check(state, Action(sql)), worker.check(state, Action(sql))
    assert a.details["budget_used"] == w.details["budget_used"] > 0
    tight = SQLEvaluator(step_budget=a.details["budget_used"] - 1000, isolation="worker")
    assert tight.check(state, Action(sql)).status == "budget"
    for ev in (auto, worker, tight):
        ev.close()


def test_row_cap_and_value_size_limits(make_task: TaskFactory) -> None:
    evaluator = SQLEvaluator(row_cap=50)
    state = AgentState(make_task("SELECT name FROM people"))
    many = evaluator.check(
        state,
        Action("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 500) SELECT i FROM r"),
    )
    assert many.status == "budget" and "50" in many.reason
    blob = evaluator.check(state, Action("SELECT zeroblob(2000000000)"))
    assert blob.status == "error" and blob.score == 0.0


def test_database_file_unchanged_after_hostile_queries(make_task: TaskFactory, tiny_db: Path) -> None:
    before = _sha(tiny_db)
    files_before = sorted(p.name for p in tiny_db.parent.iterdir())
    evaluator = SQLEvaluator(step_budget=1_000_000)
    for immutable in (False, True):
        state = AgentState(make_task("SELECT name FROM people", immutable=immutable))
        for sql in HOSTILE + [
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
        ]:
            evaluator.check(state, Action(sql))
        assert evaluator.check(state, Action("SELECT name FROM people")).solved
    evaluator.close()
    assert _sha(tiny_db) == before
    assert sorted(p.name for p in tiny_db.parent.iterdir()) == files_before  # no journal / wal files
    conn = sqlite3.connect(tiny_db)
    assert conn.execute("SELECT count(*) FROM people").fetchone() == (6,)
    conn.close()


def test_steps_are_counted_at_the_progress_granularity(make_task: TaskFactory) -> None:
    """The step count comes in multiples of `PROGRESS_STEPS` (the progress handler's granularity)
    and a runaway query is stopped within one granule past its budget, the same on every run."""
    state = AgentState(make_task("SELECT name FROM people"))
    runaway = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    budget = 5 * PROGRESS_STEPS + 1
    evaluator = SQLEvaluator(step_budget=budget)
    stopped = evaluator.check(state, Action(runaway))
    used = stopped.details["budget_used"]
    assert stopped.status == "budget" and used % PROGRESS_STEPS == 0
    assert budget < used <= budget + PROGRESS_STEPS
    right = evaluator.check(state, Action("SELECT name FROM people"))
    wrong = evaluator.check(state, Action("SELECT name FROM people WHERE 0"))
    for outcome in (right, wrong):  # the fast path (identical rows) records the budget as the slow one
        assert outcome.details["budget_kind"] == "sqlite-vm-steps"
        assert (
            outcome.details["budget_limit"] == budget and outcome.details["budget_used"] % PROGRESS_STEPS == 0
        )
    assert right.solved and not wrong.solved
    evaluator.close()


def test_undecodable_text_is_read_leniently_on_an_open_connection(
    make_task: TaskFactory, tmp_path: Path
) -> None:
    """Text that is not UTF-8 is decoded with replacement characters (one retry), also when the
    connection is already open (the evaluator's direct path hands the retry to the engine)."""
    db = tmp_path / "latin.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO t VALUES (1, 'ok'), (2, CAST(x'e96c6576' AS TEXT))")
    conn.commit()
    conn.close()
    evaluator = SQLEvaluator()
    state = AgentState(make_task("SELECT id FROM t", db_path=db))
    assert evaluator.check(state, Action("SELECT id FROM t")).solved  # opens the connection
    bad = evaluator.check(state, Action("SELECT name FROM t WHERE id = 2"))
    assert bad.status == "ok" and not bad.solved and evaluator.last_run["where"] == "process"
    assert evaluator.run(str(db), "SELECT name FROM t WHERE id = 2", immutable=False)[0].rows == [
        ("\ufffdlev",)
    ]
    evaluator.close()
