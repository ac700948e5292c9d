"""The SQL evaluator's verdict memo (issue 35): repeats of a check on an immutable database are
answered from memory with the very same verdict; nothing that depends on the machine is kept."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.sql import evaluator as sql_evaluator
from cm_gym.domains.sql import workmemo
from cm_gym.domains.sql.evaluator import SQLEvaluator

from .conftest import TaskFactory, overwrite_stored_values

HEAVY = "SELECT count(*) FROM people a, people b, people c, people d, people e, people f, people g"


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every query the evaluator really executes in this process, in order."""
    seen: list[str] = []
    real = sql_evaluator.execute

    def counting(box: Any, sql: str, *args: Any) -> Any:
        seen.append(sql)
        return real(box, sql, *args)

    monkeypatch.setattr(sql_evaluator, "execute", counting)
    return seen


def check(ev: SQLEvaluator, task: Any, sql: str) -> Any:
    return ev.check(AgentState(task), Action(sql))


def test_a_repeated_check_on_an_immutable_database_is_not_run_again(
    make_task: TaskFactory, runs: list[str]
) -> None:
    task = make_task("SELECT name FROM people WHERE age > 20", immutable=True)
    ev = SQLEvaluator()
    first = check(ev, task, "SELECT name FROM people WHERE age >= 20")
    again = check(ev, task, "SELECT name FROM people WHERE age >= 20")
    assert again is first and first.solved
    assert ev.memo.hits == 1
    assert runs.count("SELECT name FROM people WHERE age >= 20") == 1
    other = check(ev, task, "SELECT name FROM people")
    assert not other.solved and ev.memo.hits == 1


def test_the_memo_gives_the_verdict_a_fresh_evaluator_gives(make_task: TaskFactory) -> None:
    task = make_task("SELECT city, count(*) FROM people GROUP BY city", immutable=True)
    queries = ["SELECT city, count(*) FROM people GROUP BY city", "SELECT city FROM people", "SELEC oops",
               "DELETE FROM people", "SELECT city, count(*) FROM people GROUP BY city ORDER BY 2"]  # fmt: skip
    ev = SQLEvaluator()
    for sql in queries * 2:
        fresh = SQLEvaluator()
        fresh.memo.size = 0
        a, b = check(ev, task, sql), check(fresh, task, sql)
        assert (a.score, a.solved, a.status, a.reason, a.feedback, dict(a.details)) == (
            b.score, b.solved, b.status, b.reason, b.feedback, dict(b.details)
        )  # fmt: skip
    assert ev.memo.hits == len(queries)


def test_a_write_to_a_database_that_may_change_makes_a_miss(make_task: TaskFactory, tiny_db: Path) -> None:
    task = make_task("SELECT count(*) FROM pets", immutable=False)
    ev = SQLEvaluator()
    assert check(ev, task, "SELECT 4").solved
    assert check(ev, task, "SELECT 4").solved and ev.memo.hits == 1
    conn = sqlite3.connect(tiny_db)
    conn.execute("INSERT INTO pets VALUES (5, 2, 'owl', 1.0)")
    conn.commit()
    conn.close()
    ev._references.clear()  # the reference's result changed with the file
    assert not check(ev, task, "SELECT 4").solved
    assert check(ev, task, "SELECT 5").solved and ev.memo.hits == 1


def test_reading_the_commit_counter_leaves_pragmas_refused(make_task: TaskFactory) -> None:
    task = make_task("SELECT 1", immutable=False)
    ev = SQLEvaluator()
    check(ev, task, "SELECT 1")
    box = next(iter(ev._engine.boxes.values()))
    assert isinstance(box.data_version(), int) and not box.reading_version
    assert check(ev, task, "SELECT * FROM pragma_table_info('people')").status in ("refused", "error")
    # the counter the memo keys on stays out of an action's reach, also right after cm_gym read it
    assert check(ev, task, "SELECT * FROM pragma_data_version()").status in ("refused", "error")
    assert check(ev, task, "SELECT data_version FROM pragma_data_version").status in ("refused", "error")
    assert check(ev, task, "PRAGMA data_version").status in ("refused", "error")


def test_the_hang_guard_verdict_is_never_kept(make_task: TaskFactory, runs: list[str]) -> None:
    task = make_task("SELECT 1", immutable=True)
    ev = SQLEvaluator(hang_guard_s=1e-9)
    first = check(ev, task, HEAVY)
    assert first.status == "infrastructure"
    before = runs.count(HEAVY)
    second = check(ev, task, HEAVY)
    assert second.status == "infrastructure" and runs.count(HEAVY) > before
    assert ev.memo.hits == 0


def test_a_changed_budget_is_a_different_verdict(make_task: TaskFactory) -> None:
    task = make_task("SELECT 1", immutable=True)
    ev = SQLEvaluator()
    assert check(ev, task, HEAVY).status == "ok"
    ev.step_budget = 10_000
    assert check(ev, task, HEAVY).status == "budget"


def test_the_memo_is_bounded_and_can_be_turned_off(make_task: TaskFactory, runs: list[str]) -> None:
    task = make_task("SELECT 1", immutable=True)
    ev = SQLEvaluator()
    ev.memo.size = 2
    for sql in ("SELECT 1", "SELECT 2", "SELECT 3", "SELECT 3"):
        check(ev, task, sql)
    assert len(ev.memo) == 2 and ev.memo.hits == 1
    off = SQLEvaluator()
    off.memo.size = 0
    check(off, task, "SELECT 7")
    check(off, task, "SELECT 7")
    assert off.memo.hits == 0 and runs.count("SELECT 7") == 2


def test_a_pickled_evaluator_starts_with_an_empty_memo(make_task: TaskFactory) -> None:
    task = make_task("SELECT 1", immutable=True)
    ev = SQLEvaluator()
    check(ev, task, "SELECT 1")
    copy = pickle.loads(pickle.dumps(ev))
    assert len(copy.memo) == 0 and check(copy, task, "SELECT 1").solved


def test_a_fresh_evaluator_reads_the_verdicts_an_earlier_one_stored(
    make_task: TaskFactory, runs: list[str], memo_on: Path
) -> None:
    task = make_task("SELECT name FROM people WHERE city = 'Oslo'", immutable=True)
    queries = ["SELECT name FROM people WHERE city = 'Oslo'", "SELECT name FROM people", "SELEC x"]
    first = [check(SQLEvaluator(), task, sql) for sql in queries]
    workmemo.sql_work().close()  # as a later process: the file is opened again
    runs.clear()
    later = SQLEvaluator()
    again = [check(later, task, sql) for sql in queries]
    assert runs == [] and later.memo.stored_hits == len(queries)
    for a, b in zip(first, again, strict=True):
        assert (a.score, a.solved, a.status, a.reason, a.feedback, dict(a.details)) == (
            b.score, b.solved, b.status, b.reason, b.feedback, dict(b.details)
        )  # fmt: skip
        assert type(a.score) is type(b.score)


def test_stored_verdicts_follow_the_file_content(
    make_task: TaskFactory, tiny_db: Path, memo_on: Path
) -> None:
    task = make_task("SELECT count(*) FROM pets", immutable=True)
    assert check(SQLEvaluator(), task, "SELECT 4").solved
    workmemo.sql_work().close()  # as a later process: the file is opened again
    same = SQLEvaluator()
    assert check(same, task, "SELECT 4").solved and same.memo.stored_hits == 1
    conn = sqlite3.connect(tiny_db)
    conn.execute("INSERT INTO pets VALUES (5, 2, 'owl', 1.0)")
    conn.commit()
    conn.close()
    later = SQLEvaluator()
    assert not check(later, task, "SELECT 4").solved and later.memo.stored_hits == 0


def test_a_corrupt_stored_verdict_is_checked_again(
    make_task: TaskFactory, runs: list[str], memo_on: Path
) -> None:
    task = make_task("SELECT 1", immutable=True)
    check(SQLEvaluator(), task, "SELECT 1")
    memo = workmemo.sql_work()
    memo.close()
    overwrite_stored_values(memo.path, "'[1, \"not a verdict\"'")
    runs.clear()
    later = SQLEvaluator()
    assert check(later, task, "SELECT 1").solved and runs == ["SELECT 1"] and later.memo.stored_hits == 0


def test_with_the_work_memo_off_nothing_is_stored(
    make_task: TaskFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    task = make_task("SELECT 1", immutable=True)
    check(SQLEvaluator(), task, "SELECT 1")
    workmemo.sql_work().flush()
    later = SQLEvaluator()
    check(later, task, "SELECT 1")
    assert later.memo.stored_hits == 0 and not (tmp_path / "cache" / "work").exists()


def _age(path: Path, seconds: float) -> None:
    """Set the file's times `seconds` into the past (a database nobody has written lately)."""
    import os
    import time

    past = time.time() - seconds
    os.utime(path, (past, past))


def _commit(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_a_quiet_database_answers_its_version_from_its_stats(tiny_db: Path) -> None:
    from cm_gym.domains.sql._engine import QUIET_S, Box

    _age(tiny_db, QUIET_S + 60)
    box = Box(str(tiny_db), False, 1000)
    first = box.data_version()
    assert [box.data_version() for _ in range(5)] == [first] * 5
    assert box.version_reads == 1  # the stats were enough after the first read
    _commit(tiny_db, "INSERT INTO pets VALUES (9, 1, 'owl', 1.0)")  # a write: its time is now
    changed = box.data_version()
    assert changed != first and box.version_reads == 2
    assert box.data_version() == changed and box.version_reads == 3  # a fresh write: no shortcut


def test_a_recently_written_database_reads_its_version_every_time(tiny_db: Path) -> None:
    from cm_gym.domains.sql._engine import Box

    box = Box(str(tiny_db), False, 1000)  # the fixture just wrote the file
    for _ in range(3):
        box.data_version()
    assert box.version_reads == 3


def test_a_generated_database_is_quiet_from_its_first_read_and_its_commits_are_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`schemas.ensure_database` settles a new file before renaming it into place
    (`_engine.settle`): a fresh cache's first process reads its version once, not on every check
    for 10 s; a commit after that is still seen, and so is a file rebuilt over it."""
    import os

    from cm_gym.domains.sql import schemas
    from cm_gym.domains.sql._engine import Box

    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    db = next(iter(schemas.DATABASES))
    path = schemas.ensure_database(db, seed=5)
    box = Box(str(path), False, 1000)
    first = box.data_version()
    assert [box.data_version() for _ in range(5)] == [first] * 5 and box.version_reads == 1
    table = sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    _commit(path, f'DELETE FROM "{table}" WHERE rowid = (SELECT min(rowid) FROM "{table}")')
    assert box.data_version() != first and box.version_reads == 2
    os.unlink(path)  # rebuilt: another inode, settled again
    rebuilt = schemas.ensure_database(db, seed=5)
    box2 = Box(str(rebuilt), False, 1000)
    box2.data_version()
    box2.data_version()
    assert box2.version_reads == 1
    fresh = Box(str(rebuilt), False, 1000)
    assert box.data_version() is not None and box.version_reads == 3  # (stats changed: read again)
    assert fresh.data_version() == box2.data_version()


def test_a_commit_to_a_quiet_wal_database_is_seen(tiny_db: Path) -> None:
    from cm_gym.domains.sql._engine import QUIET_S, Box

    conn = sqlite3.connect(tiny_db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    writer = sqlite3.connect(tiny_db)  # kept open: its -wal file stays
    box = Box(str(tiny_db), False, 1000)
    assert box.data_version() and box.version_reads == 1  # the -wal file was just created
    for path in (tiny_db, Path(f"{tiny_db}-wal")):
        _age(path, QUIET_S + 60)
    first = box.data_version()
    assert box.data_version() == first and box.version_reads == 2
    writer.execute("INSERT INTO pets VALUES (9, 1, 'owl', 1.0)")
    writer.commit()  # only the -wal file changes
    assert box.data_version() != first
    writer.close()


def test_a_database_whose_version_cannot_be_stated_is_read_every_time(tiny_db: Path, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:  # fmt: skip
    from cm_gym.domains.sql import _engine

    _age(tiny_db, _engine.QUIET_S + 60)
    box = _engine.Box(str(tiny_db), False, 1000)
    monkeypatch.setattr(_engine, "_in_wal_mode", lambda path: None)  # the header cannot be read
    for _ in range(3):
        box.data_version()
    assert box.version_reads == 3
