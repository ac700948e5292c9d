"""The simulated revision's candidates in the persistent work memo (issue 35): a fresh process
reads what an earlier one computed, gets exactly what computing gives, and never keeps what may
not be a pure function of the key (a plugin domain's, or edits that read a task's file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.base import Domain
from cm_gym.domains.registry import get_domain
from cm_gym.llm import revision
from cm_gym.llm.revision import CandidateCache, Candidates, candidates, decode_candidates, encode_candidates

DRAFT = "SELECT name FROM people WHERE age >= 30 ORDER BY name"
RECORDS = [
    ("SELECT name FROM people WHERE age >= 18", "SELECT name FROM people WHERE age > 18"),  # match
    ("SELECT a FROM t ORDER BY a ASC", "SELECT a FROM t ORDER BY a DESC"),  # analogous or not
    ("SELECT x FROM t LIMIT 5", "SELECT x FROM t LIMIT 6"),
]


def _task(**meta: Any) -> Task:
    columns = {"people.name": "text", "people.age": "number"}
    return Task("t1", "sql", "who is 30 or older?", "SQL", "", context="people(name, age)",
                features={"column_types": columns}, meta=dict(meta))  # fmt: skip


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the real `candidates` (what a memo hit skips)."""
    calls: list[str] = []
    real = revision.candidates

    def counted(domain: Domain, task: Task, draft: str, a_minus: str, a_plus: str) -> Candidates:
        calls.append(a_minus)
        return real(domain, task, draft, a_minus, a_plus)

    monkeypatch.setattr(revision, "candidates", counted)
    return calls


def _new_process() -> None:
    """What a fresh process sees: the memo's pending writes flushed and its file opened again."""
    revision._candidate_work().close()


def test_a_fresh_cache_reads_the_candidates_an_earlier_one_computed(
    memo_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql, task = get_domain("sql"), _task()
    calls = _counting(monkeypatch)
    first = [CandidateCache().get(sql, task, DRAFT, a, b) for a, b in RECORDS]
    assert len(calls) == len(RECORDS)
    _new_process()
    later = CandidateCache()
    again = [later.get(sql, task, DRAFT, a, b) for a, b in RECORDS]
    assert again == first and len(calls) == len(RECORDS)  # nothing computed twice
    assert again == [candidates(sql, task, DRAFT, a, b) for a, b in RECORDS]  # and it is right
    assert first[0].closeness == "match" and first[0].apply  # the pairs exercise real branches
    assert revision._candidate_work().path.parent == memo_on / "work"


def test_another_task_content_is_another_key(memo_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = get_domain("sql")
    calls = _counting(monkeypatch)
    CandidateCache().get(sql, _task(), DRAFT, *RECORDS[0])
    _new_process()
    other = Task("t1", "sql", "who is 30 or older?", "SQL", "", context="people(name, age)",
                 features={"column_types": {"people.name": "text"}})  # fmt: skip
    CandidateCache().get(sql, other, DRAFT, *RECORDS[0])
    assert len(calls) == 2  # same id, other column types: computed again


def test_edits_that_read_a_file_and_plugin_domains_stay_in_the_process(
    memo_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    memo = revision._candidate_work()
    looked_up = memo.hits + memo.misses
    extended = _task(sql_edit_grammar="extended", db_path="")
    assert not get_domain("sql").edits_from_task_alone(extended)
    CandidateCache().get(get_domain("sql"), extended, DRAFT, *RECORDS[0])

    class PluginSQL(type(get_domain("sql"))):  # type: ignore[misc]
        pass

    PluginSQL.__module__ = "someone_elses_plugin.domain"
    CandidateCache().get(PluginSQL(), _task(), DRAFT, *RECORDS[0])
    _new_process()
    CandidateCache().get(get_domain("sql"), extended, DRAFT, *RECORDS[0])
    CandidateCache().get(PluginSQL(), _task(), DRAFT, *RECORDS[0])
    assert len(calls) == 4
    assert memo.hits + memo.misses == looked_up  # never even looked up


def test_the_memo_off_computes_every_fresh_cache(memo_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "0")
    calls = _counting(monkeypatch)
    for _ in range(2):
        CandidateCache().get(get_domain("sql"), _task(), DRAFT, *RECORDS[0])
    assert len(calls) == 2


def test_a_stored_value_that_is_not_candidates_is_recomputed(
    memo_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql, task = get_domain("sql"), _task()
    right = CandidateCache().get(sql, task, DRAFT, *RECORDS[0])
    _new_process()
    import sqlite3

    conn = sqlite3.connect(revision._candidate_work().path)
    conn.execute("""UPDATE memo SET value = '["match", ["x"], [], [7]]'""")  # a number, not a text
    conn.commit()
    conn.close()
    calls = _counting(monkeypatch)
    assert CandidateCache().get(sql, task, DRAFT, *RECORDS[0]) == right and len(calls) == 1


@pytest.mark.parametrize(
    "data",
    [
        '["close", [], [], []]',
        '["match", [], []]',
        '{"closeness": "match"}',
        '["match", "ab", [], []]',
        '["match", [], [null], []]',
        "not json",
    ],  # fmt: skip
)
def test_decode_refuses_what_encode_never_writes(data: str) -> None:
    with pytest.raises(ValueError):
        decode_candidates(data)


def test_encoding_round_trips() -> None:
    cands = Candidates("analogous", (), ("SELECT 'é'", "SELECT 2"), ('SELECT "a"',))
    assert decode_candidates(encode_candidates(cands)) == cands
    assert decode_candidates(encode_candidates(cands).encode()) == cands
