"""Condition verdicts in the work memo (issue 35): kept by (the conditions' texts, the task's
content) only when every predicate is cm_gym's own; a later process reads them instead of
evaluating; a plugin's predicate is always evaluated; a value that does not fit is recomputed."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.memory import index as index_mod

TASKS = [
    Task(f"t{i}", "toy", f"List the people older than {i} in Oslo" if i % 2 else "Count pets", "toy", "",
         family="f1" if i % 3 else "f2", features={"boundary": "inclusive" if i % 2 else "exclusive"})
    for i in range(6)
]  # fmt: skip


def plugin_predicate(task: Task, args: tuple[str, ...]) -> bool:
    return task.task_id.endswith(args[0])


@pytest.fixture
def memo_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    return tmp_path / "cache"


def own_index() -> Any:
    texts = ['mentions_any("older")', 'family_is("f1")', 'feature_equals("boundary", "inclusive")',
             'mentions_none("pets") AND family_is("f2")']  # fmt: skip
    return SimpleNamespace(conditions=[parse_condition(t) for t in texts], _conditions_key=None)


def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = index_mod._evaluate

    def counting(conditions: Any, task: Task) -> np.ndarray:
        seen.append(task.task_id)
        return real(conditions, task)

    monkeypatch.setattr(index_mod, "_evaluate", counting)
    return seen


def test_a_later_process_reads_the_verdicts(memo_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = evaluations(monkeypatch)
    first = [index_mod._holds_through_memo(own_index(), t) for t in TASKS]
    assert seen == [t.task_id for t in TASKS]
    index_mod._HOLDS_MEMO[0].close()  # as a later process: the file is opened again
    again = [index_mod._holds_through_memo(own_index(), t) for t in TASKS]
    assert len(seen) == len(TASKS)  # nothing evaluated again
    assert all(np.array_equal(a, b) and b.dtype == bool for a, b in zip(first, again, strict=True))
    assert any(v.any() for v in first) and not all(v.all() for v in first)


def test_a_plugin_predicate_is_always_evaluated(memo_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = evaluations(monkeypatch)
    index = SimpleNamespace(
        conditions=[parse_condition('ends_with("3")', {"ends_with": plugin_predicate})], _conditions_key=None
    )
    for _ in range(2):
        got = [bool(index_mod._holds_through_memo(index, t)[0]) for t in TASKS]
    assert got == [t.task_id == "t3" for t in TASKS] and len(seen) == 2 * len(TASKS)
    assert index._conditions_key == ""


def test_a_value_that_does_not_fit_is_recomputed(memo_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = [index_mod._holds_through_memo(own_index(), t) for t in TASKS]
    memo = index_mod._HOLDS_MEMO[0]
    memo.close()
    conn = sqlite3.connect(memo.path)
    conn.execute("UPDATE memo SET value = X'0102'")
    conn.commit()
    conn.close()
    seen = evaluations(monkeypatch)
    got = [index_mod._holds_through_memo(own_index(), t) for t in TASKS]
    assert len(seen) == len(TASKS)
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_described_predicates_are_seen_through_their_wrapper() -> None:
    """`domains.base.described` wraps a predicate in an argument-free partial: SAT's and SMT's
    own predicates count as cm_gym's, a plugin's described predicate still does not."""
    from cm_gym.domains.base import described
    from cm_gym.domains.sat.conditions import PREDICATES as SAT_PREDICATES

    assert all(index_mod._is_own(fn) for fn in SAT_PREDICATES.values())
    assert not index_mod._is_own(described(plugin_predicate, "(x) - a plugin's"))
    assert not index_mod._is_own(functools.partial(next(iter(SAT_PREDICATES.values())).func, "bound"))
