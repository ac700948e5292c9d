"""Lessons that can transfer (issue 32 item 5): a generic contrast distilled from a real failure
gets a condition over the question's wording (no table or column name) and an executable
transform that `revise="transform"` applies to another database's real draft with no LLM; a
database-bound contrast keeps its database-bound condition and has no transform."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from cm_gym.agent import TRANSFORM_MARK, BaseAgent, Cost, RecordView
from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.conditions import parse_condition, parse_syntax
from cm_gym.domains.registry import get_domain
from cm_gym.domains.sql import transfer
from cm_gym.domains.sql.conditions import column_types

SQL = get_domain("sql")


class NoLLM:
    """An LLM that must never be called (a transform revision makes no call)."""

    def complete(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("revise='transform' called the LLM")


def _names(task: Task) -> set[str]:
    """The source database's table and column names (what a generic condition must not name)."""
    out: set[str] = set()
    for key in column_types(task):
        out.update(key.split(".", 1))
    return out


def _assert_database_free(condition: str, task: Task) -> None:
    preds = parse_syntax(condition)
    assert preds, "a generic record keeps a wording condition"
    assert not {p.kind for p in preds} & transfer.DB_BOUND_PREDICATES, condition
    names = _names(task)
    for p in preds:
        for arg in p.args:
            assert arg.lower() not in names, (arg, condition)
            assert not re.search(r"\w+\.\w+", arg), (arg, condition)


# -- unit: kinds, transforms, shapes -------------------------------------------------------------
@pytest.mark.parametrize(
    ("a_minus", "a_plus", "generic"),
    [
        ("SELECT COUNT(DISTINCT s) FROM t", "SELECT COUNT(*) FROM t", True),
        ("SELECT a FROM t LEFT JOIN u ON t.x = u.y", "SELECT a FROM t JOIN u ON t.x = u.y", True),
        ("SELECT a FROM t WHERE b = 'v'", "SELECT a FROM t WHERE b LIKE '%v%'", True),
        ("SELECT a, b FROM t ORDER BY b", "SELECT a FROM t ORDER BY b", True),  # sort key dropped
        ("SELECT a FROM t WHERE b > 3", "SELECT a FROM t WHERE b >= 3", True),  # base kind
        ("SELECT a, b FROM t", "SELECT b FROM t", False),  # a column with no structural role
        ("SELECT a FROM t WHERE b = 'france'", "SELECT a FROM t WHERE b = 'France'", False),  # casing
        ("SELECT a FROM t JOIN u ON t.x = u.y", "SELECT a FROM t JOIN u ON t.x = u.z", False),  # join key
        ("SELECT a FROM t WHERE b > 3 AND c = 1", "SELECT a FROM t WHERE b > 3", False),  # conjunct
    ],
)
def test_generic_by_edit_kind(a_minus: str, a_plus: str, generic: bool) -> None:
    assert transfer.is_generic(a_minus, a_plus) is generic
    text = SQL.transform_of(Task("t", "sql", "q", "x", ""), a_minus, a_plus)
    assert bool(text) is generic
    if generic:  # the stored transform names no column of the source query
        assert not re.search(r'"(a|b|c|s|x|y|t|u)"', text), text


def test_transform_applies_at_the_first_fitting_site_or_not_at_all() -> None:
    count = transfer.dumps({"kind": "count", "frm": "DISTINCT", "to": "STAR"})
    task = Task("t", "sql", "q", "x", "")
    assert SQL.apply_transform(task, "SELECT g, COUNT(DISTINCT k) FROM r GROUP BY g", count) == (
        "SELECT g, COUNT(*) FROM r GROUP BY g"
    )
    assert SQL.apply_transform(task, "SELECT COUNT(*) FROM r", count) is None  # no COUNT(DISTINCT)
    drop = transfer.dumps({"kind": "project", "to": "drop", "role": "order_key"})
    assert SQL.apply_transform(task, "SELECT n, h FROM p ORDER BY h DESC", drop) == (
        "SELECT n FROM p ORDER BY h DESC"
    )
    assert SQL.apply_transform(task, "SELECT n FROM p ORDER BY h", drop) is None  # one column
    assert SQL.apply_transform(task, "SELECT n, m FROM p ORDER BY h", drop) is None  # no sort key shown
    assert SQL.apply_transform(task, "SELECT 1", "") is None
    assert SQL.apply_transform(task, "SELECT 1", "not json") is None


def test_transform_revision_falls_back_to_the_draft_without_an_llm_call() -> None:
    agent = BaseAgent(NoLLM(), SQL, evaluator=None, revise="transform")  # type: ignore[arg-type]
    state = AgentState(Task("t", "sql", "q", "x", ""))
    count = transfer.dumps({"kind": "count", "frm": "DISTINCT", "to": "STAR"})
    view = RecordView("r1", "text", "a-", "a+", count)
    cost = Cost()
    assert agent.revise(state, "SELECT COUNT(*) FROM r", view, cost) == "SELECT COUNT(*) FROM r"
    assert agent.revise(state, "SELECT 1", RecordView("r2", "text", "a-", "a+"), cost) == "SELECT 1"
    assert cost.llm_calls == 0
    with pytest.raises(ValueError, match="revise"):
        BaseAgent(NoLLM(), SQL, evaluator=None, revise="magic")  # type: ignore[arg-type]


# -- real drafts ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real(shared_data: Path) -> tuple[dict[str, Task], object]:
    from cm_gym.domains.registry import get_benchmark
    from cm_gym.llm.recordings import load_recordings

    tasks = {t.task_id: replace(t, meta={**t.meta, "sql_edit_grammar": "extended"})
             for t in get_benchmark("SpiderSQL").load()}  # fmt: skip
    return tasks, load_recordings("spider", shared_data / "llm-outputs")


def _draft(real: tuple[dict[str, Task], object], task_id: str, system: str) -> tuple[Task, str]:
    tasks, rows = real
    task = tasks[task_id]
    return task, SQL.parse_action(rows.get(SQL.recording_key(task), system).text)  # type: ignore[attr-defined]


def _verified_fix(task: Task, draft: str, key: str) -> str:
    """The one-edit repair of kind `key` that the world model verifies on the task's database."""
    ev, state = SQL.make_evaluator(), AgentState(task)
    assert not ev.check(state, Action(draft)).solved, "the recorded draft is a real failure"
    fixes = [e.text for e in SQL.edit_operators(task, draft) if SQL.contrast_key(draft, e.text) == key]
    fixes = [t for t in fixes if ev.check(state, Action(t)).solved]
    assert fixes, (task.task_id, key)
    return fixes[0]


@pytest.mark.data
@pytest.mark.parametrize(
    ("source", "source_system", "key", "target", "target_system"),
    [
        # GPT-4 counts distinct states on voter_1; Codex DIN-SQL counts distinct pets on pets_1
        ("spider-0455", "gpt-4-zero-shot", "count:DISTINCT->STAR", "spider-0080", "codex-din-sql"),
        # GPT-4 also projects the sort key: employees by age, then poker players by final tables
        ("spider-0169", "gpt-4-zero-shot", "project:drop", "spider-0432", "gpt-4-zero-shot"),
    ],
)
def test_a_generic_record_from_one_real_failure_repairs_another_database(
    real: tuple[dict[str, Task], object], source: str, source_system: str, key: str, target: str,
    target_system: str,
) -> None:  # fmt: skip
    src, a_minus = _draft(real, source, source_system)
    a_plus = _verified_fix(src, a_minus, key)
    blind = replace(src, reference="")
    distilled = SQL.distil(blind, a_minus, a_plus)
    _assert_database_free(distilled.condition, src)
    transform = SQL.transform_of(blind, a_minus, a_plus)
    assert transform and transfer.loads(transform)["kind"] == key.split(":")[0]

    dst, draft = _draft(real, target, target_system)
    assert dst.env_id != src.env_id
    condition = parse_condition(distilled.condition, SQL.condition_predicates())
    assert condition.holds(replace(dst, reference="")), "the wording condition holds on the other database"
    evaluator = SQL.make_evaluator()
    agent = BaseAgent(NoLLM(), SQL, evaluator, revise="transform")  # type: ignore[arg-type]
    view = RecordView("r", "text", a_minus, a_plus, transform)
    decision = agent.decide(AgentState(dst), view, draft=draft)
    assert decision.changed_by_memory and decision.outcome.solved
    assert decision.action_mark == TRANSFORM_MARK and decision.cost.llm_calls == 0


@pytest.mark.data
def test_database_bound_contrasts_keep_database_bound_conditions(
    real: tuple[dict[str, Task], object],
) -> None:
    # GPT-4 projects the singer's name beside the song (concert_singer): a column with no
    # structural role, so the lesson is about this schema
    src, a_minus = _draft(real, "spider-0012", "gpt-4-zero-shot")
    a_plus = _verified_fix(src, a_minus, "project:drop")
    blind = replace(src, reference="")
    assert SQL.transform_of(blind, a_minus, a_plus) == ""
    assert "sql_same_db" in SQL.distil(blind, a_minus, a_plus).condition
    # a join key swapped in a real draft: the join-key condition names the column
    task, draft = _draft(real, "spider-0492", "gpt-4-zero-shot")
    swap = next(
        e.text
        for e in SQL.edit_operators(task, draft)
        if SQL.contrast_key(draft, e.text).startswith("join_key")
    )
    assert SQL.transform_of(task, draft, swap) == ""
    kinds = {p.kind for p in parse_syntax(SQL.distil(replace(task, reference=""), draft, swap).condition)}
    assert kinds & transfer.DB_BOUND_PREDICATES
