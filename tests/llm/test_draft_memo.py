"""The default simulator's drafts in the persistent work memo (issue 35): a fresh process reads
what an earlier one computed and drafts exactly what computing drafts; another seed or task is
another key; what may not be a pure function of the key (a plugin domain's, a profile's, edits
that read a task's file) is never kept; a stored value that is not a draft is recomputed."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cm_gym.agent import BaseAgent, Cost
from cm_gym.core.types import AgentState, Attempt, Outcome, Task, task_text
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm import draft_memo
from cm_gym.llm.draft_memo import decode_draft
from cm_gym.llm.revision import kept_across_processes
from cm_gym.llm.simulated import SimulatedLLM

FAILED = Outcome(score=0.0, solved=False, feedback="Wrong result set. Rows differ.")


@pytest.fixture(scope="module")
def sql_tasks() -> list[Task]:
    return get_benchmark("SQL").load_tasks()[:40]


def _new_process() -> None:
    """What a fresh process sees: the memo's pending writes flushed and its file opened again."""
    draft_memo.draft_work().close()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every draft the simulator computes (what a memo hit skips)."""
    calls: list[str] = []
    real = SimulatedLLM._make_draft

    def counted(self: SimulatedLLM, task: Task, failed_attempts: int, agent: str) -> str:
        calls.append(task.task_id)
        return real(self, task, failed_attempts, agent)

    monkeypatch.setattr(SimulatedLLM, "_make_draft", counted)
    return calls


def _drafts(llm: SimulatedLLM, tasks: list[Task], failures: int = 0) -> list[str]:
    out = []
    for task in tasks:
        state = AgentState(task)
        for i in range(failures):
            state = state.with_attempt(Attempt(f"SELECT {i}", FAILED))
        domain = get_domain(task.domain)
        out.append(BaseAgent(llm, domain, domain.make_evaluator()).draft(state, Cost()))
    return out


def test_a_fresh_process_reads_the_drafts_an_earlier_one_computed(
    memo_on: Path, sql_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    first = _drafts(SimulatedLLM(seed=3), sql_tasks) + _drafts(
        SimulatedLLM(seed=3), sql_tasks[:10], failures=2
    )
    assert len(calls) == len(sql_tasks) + 10
    _new_process()
    again = _drafts(SimulatedLLM(seed=3), sql_tasks) + _drafts(
        SimulatedLLM(seed=3), sql_tasks[:10], failures=2
    )
    assert again == first and len(calls) == len(sql_tasks) + 10  # nothing computed twice
    assert draft_memo.draft_work().path.parent == memo_on / "work"
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "0")
    assert (
        _drafts(SimulatedLLM(seed=3), sql_tasks) + _drafts(SimulatedLLM(seed=3), sql_tasks[:10], 2) == first
    )
    assert any(d != t.reference for d, t in zip(first, sql_tasks, strict=False))  # real slips were drawn


def test_another_seed_or_task_content_is_another_key(
    memo_on: Path, sql_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed3 = _drafts(SimulatedLLM(seed=3), sql_tasks)
    _new_process()
    seed4 = _drafts(SimulatedLLM(seed=4), sql_tasks)
    # the same task ids and content with each other's references: only the reference differs
    other = [
        dataclasses.replace(t, reference=u.reference) for t, u in zip(sql_tasks, sql_tasks[1:], strict=False)
    ]
    shifted = _drafts(SimulatedLLM(seed=3), other)
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "0")
    assert seed4 == _drafts(SimulatedLLM(seed=4), sql_tasks) and seed4 != seed3
    assert shifted == _drafts(SimulatedLLM(seed=3), other) and shifted != seed3[: len(other)]


def test_plugin_domains_profiles_and_file_reading_edits_are_never_kept(
    memo_on: Path, sql_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = get_domain("sql")
    extended = dataclasses.replace(sql_tasks[0], meta={**sql_tasks[0].meta, "sql_edit_grammar": "extended"})
    assert not sql.edits_from_task_alone(extended)
    assert not kept_across_processes(sql, extended)

    class PluginSQL(type(sql)):  # type: ignore[misc]
        pass

    PluginSQL.__module__ = "someone_elses_plugin.domain"
    assert not kept_across_processes(PluginSQL(), sql_tasks[0])
    assert kept_across_processes(sql, sql_tasks[0])
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "off")
    assert not kept_across_processes(sql, sql_tasks[0])
    monkeypatch.delenv("CM_GYM_WORK_MEMO")

    memo = draft_memo.draft_work()
    looked_up = memo.hits + memo.misses
    profiled = SimulatedLLM(seed=0, profile="codex-din-sql")
    calls = _counting(monkeypatch)
    for _ in range(2):
        _new_process()
        _drafts(SimulatedLLM(seed=0, profile=profiled.profile), sql_tasks[:5])
    assert len(calls) == 10 and memo.hits + memo.misses == looked_up  # never even looked up


@pytest.mark.parametrize("stored", [b"\xff\xfe not utf-8", b"x" * (draft_memo.MAX_DRAFT_BYTES + 1)])
def test_a_stored_value_that_is_not_a_draft_is_recomputed(
    memo_on: Path, sql_tasks: list[Task], monkeypatch: pytest.MonkeyPatch, stored: bytes
) -> None:
    right = _drafts(SimulatedLLM(seed=1), sql_tasks[:5])
    _new_process()
    conn = sqlite3.connect(draft_memo.draft_work().path)
    conn.execute("UPDATE memo SET value = ?", (stored,))
    conn.commit()
    conn.close()
    calls = _counting(monkeypatch)
    assert _drafts(SimulatedLLM(seed=1), sql_tasks[:5]) == right and len(calls) == 5
    with pytest.raises((ValueError, UnicodeDecodeError)):
        decode_draft(stored)


def test_task_text_is_shared_by_a_task_and_its_blind_copy_and_follows_content() -> None:
    features: dict[str, Any] = {"column_types": {"people.age": "number"}}
    task = Task("t9", "sql", "who is old?", "SQL", "SELECT 1", context="people(age)", features=features)
    blind = dataclasses.replace(task, reference="")
    assert task_text(blind) == task_text(task)
    assert task_text(blind) is task_text(task)  # one entry: the JSON is written once
    same_content = dataclasses.replace(task, features={"column_types": {"people.age": "number"}})
    assert task_text(same_content) == task_text(task)
    other = dataclasses.replace(task, features={"column_types": {"people.age": "text"}})
    assert task_text(other) != task_text(task)
    assert task_text(dataclasses.replace(task, prompt="who is young?")) != task_text(task)
