"""Issue 14, SQL: the budgets and memory are hard bounds. Vetting is linear (no backtracking
regexes), calls SQLite cannot interrupt run in a killable worker under a CPU-time backstop and a
wall-clock hang guard, memory blow-ups stop at the cap, and the tokenizer agrees with SQLite's
own about strings, identifiers and comments (fuzzed). Issue 25: no assertion depends on how fast
the machine is (the heavy probes need minutes of CPU anywhere)."""

from __future__ import annotations

import resource
import sqlite3
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql.evaluator import SQLEvaluator
from cm_gym.domains.sql.probes import BACKTRACKING, HEAVY, MEMORY, UNINTERRUPTIBLE
from cm_gym.domains.sql.vetting import _OPAQUE, mask, vet

TaskFactory = Callable[..., Task]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql", BACKTRACKING)
def test_vetting_is_linear_on_backtracking_inputs(make_task: TaskFactory, sql: str) -> None:
    outcome = SQLEvaluator().check(AgentState(make_task("SELECT name FROM people")), Action(sql))
    assert outcome.status in ("error", "refused") and outcome.score == 0.0
    big = vet("SELECT " + "/**/" * 5000 + "a" * 20000 + "(")  # 40 KB: still instant
    assert big.status == "ok" and not big.bounded


@pytest.mark.parametrize("sql", UNINTERRUPTIBLE + HEAVY)
def test_uninterruptible_calls_run_in_the_worker(sql: str) -> None:
    assert not vet(sql).bounded


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sql", HEAVY)
def test_uninterruptible_call_is_killed_by_the_cpu_backstop(make_task: TaskFactory, sql: str) -> None:
    evaluator = SQLEvaluator(cpu_limit_s=0.5)
    state = AgentState(make_task("SELECT name FROM people"))
    outcome = evaluator.check(state, Action(sql))
    assert outcome.status == "budget" and "CPU time" in outcome.reason and "killed" in outcome.reason
    assert evaluator.last_run["cpu_s"] >= 0.5 and outcome.details["budget_kind"] == "sqlite-vm-steps"
    assert evaluator.check(state, Action("SELECT name FROM people")).solved
    evaluator.close()


@pytest.mark.timeout(120)
def test_the_hang_guard_gives_infrastructure_after_one_retry(
    make_task: TaskFactory, caplog: pytest.LogCaptureFixture
) -> None:
    evaluator = SQLEvaluator(cpu_limit_s=10_000, hang_guard_s=0.3)
    state = AgentState(make_task("SELECT name FROM people"))
    outcome = evaluator.check(state, Action(HEAVY[0]))
    assert outcome.status == "infrastructure" and not outcome.solved and "hang guard" in outcome.reason
    assert "retrying once" in caplog.text
    assert evaluator.check(state, Action("SELECT name FROM people")).solved
    evaluator.close()


@pytest.mark.parametrize("sql", MEMORY)
def test_memory_blow_up_stops_at_the_cap_outside_this_process(make_task: TaskFactory, sql: str) -> None:
    evaluator = SQLEvaluator()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome = evaluator.check(AgentState(make_task("SELECT name FROM people")), Action(sql))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    # the memory cap stops it (or the CPU backstop: both are status "budget")
    assert outcome.status == "budget" and outcome.score == 0.0
    assert grown_mb < 150
    evaluator.close()


def test_bounded_queries_stay_in_process_and_the_rest_agree_in_the_worker(make_task: TaskFactory) -> None:
    state = AgentState(make_task("SELECT name FROM people WHERE name LIKE '%e%'"))
    auto, worker = SQLEvaluator(), SQLEvaluator(isolation="worker")
    for sql in (
        "SELECT name FROM people WHERE name LIKE '%e%'",
        "SELECT name FROM people WHERE instr(name, 'e') > 0",
        "SELECT name FROM people WHERE name LIKE '%' || 'e' || '%'",
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 5) SELECT count(*) FROM r",
        "SELECT name FROM people; DROP TABLE people",
        "DROP TABLE people",
    ):
        a, w = auto.check(state, Action(sql)), worker.check(state, Action(sql))
        assert (a.status, a.score, a.reason) == (w.status, w.score, w.reason), sql
    assert auto._worker is not None and worker._worker is not None
    assert vet("SELECT count(*), max(age) FROM people WHERE city LIKE 'O%' GROUP BY city").bounded
    auto.close()
    worker.close()


def test_bad_isolation_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="isolation"):
        SQLEvaluator(isolation="sometimes")


# -- fuzzing ------------------------------------------------------------------------------------
FRAGMENTS = ["SELECT", " ", "'", '"', "`", "[", "]", "--", "\n", "/*", "*/", ";", "(", ")", "a", "1",
             "''", "x'", "like", "||", "drop", "with", ",", "*", "/", "-"]  # fmt: skip
soup = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ends_unterminated(text: str) -> bool:
    """Whether `text` ends inside a block comment, string or quoted identifier (SQLite's rules)."""
    matches = list(_OPAQUE.finditer(text))
    last = matches[-1] if matches else None
    if last is None or last.end() != len(text):
        return False
    tok = last.group()
    if tok.startswith("--"):
        return False
    if tok.startswith("/*"):
        return len(tok) < 4 or not tok.endswith("*/")
    close = "]" if tok[0] == "[" else tok[0]
    return len(tok) < 2 or not tok.endswith(close) or (close != "]" and tok[1:].count(close) % 2 == 0)


@FUZZ
@given(soup)
def test_masking_agrees_with_sqlite_on_literals_and_comments(text: str) -> None:
    """SQLite's own tokenizer (``sqlite3_complete``) says the text ends a statement iff, in our
    masked text, the last token is ";" and the text does not end inside a comment or literal."""
    ours = mask(text).rstrip().endswith(";") and not _ends_unterminated(text)
    assert ours == sqlite3.complete_statement(text)


@settings(max_examples=100, deadline=None)
@given(st.one_of(soup, st.text(max_size=100)))
def test_vetting_is_total(text: str) -> None:
    v = vet(text)
    assert v.status in ("ok", "refused", "error")
    assert (v.status == "ok") or v.reason


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(["name", "city", "age", "upper(name)", "instr(name, 'o')", "replace(city, 'O', 'o')"]),
    st.sampled_from(["", " WHERE age > 18", " WHERE name LIKE '%e%'", " WHERE city LIKE name || '%'"]),
)
def test_in_process_and_worker_paths_give_the_same_outcome(
    make_task: TaskFactory, both: dict[str, SQLEvaluator], col: str, where: str
) -> None:
    sql = f"SELECT {col} FROM people{where}"
    state = AgentState(make_task("SELECT name FROM people WHERE age > 18"))
    a = both["auto"].check(state, Action(sql))
    w = both["worker"].check(state, Action(sql))
    assert (a.status, a.score, a.solved) == (w.status, w.score, w.solved)


@pytest.fixture(scope="module")
def both() -> dict[str, SQLEvaluator]:
    pair = {"auto": SQLEvaluator(), "worker": SQLEvaluator(isolation="worker")}
    yield pair
    for evaluator in pair.values():
        evaluator.close()
