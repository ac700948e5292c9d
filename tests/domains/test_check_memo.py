"""The SAT and SMT world models keep their verdicts (`cm_gym.domains.check_memo`): a repeated
check is answered without a worker round trip and with the same Outcome; another text or task is
a miss; a verdict whose worker call did not come back is never kept; the memo can be turned off,
starts empty in a copy, and a batch sends only what is not kept. A fresh evaluator reads what an
earlier one kept in the work memo (the same scope only), never for a file whose content changed,
and checks again where a stored value does not decode. And the envs return exactly the same
decisions with the memo as without it."""

from __future__ import annotations

import hashlib
import json
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cm_gym  # noqa: F401  (registers the benchmarks)
from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains import check_memo
from cm_gym.domains.isolated import IsolatedEvaluator, task_to_plain
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.generated import generate_encoding_tasks
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.generated import generate_smt_tasks
from cm_gym.evaluators.worker import WorkerResult

KINDS = {
    "SAT": (SatEvaluator, lambda: generate_encoding_tasks(0)),
    "SMT": (SmtEvaluator, lambda: generate_smt_tasks(0)),
}


class _Counting:
    """Counts the worker calls of one evaluator (and what each carried)."""

    def __init__(self, evaluator: IsolatedEvaluator, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        worker = evaluator._checks._get_worker()
        real = worker.call

        def call(function: str, *args: Any, **kwargs: Any) -> WorkerResult:
            self.calls.append((function, len(args[1]) if function == "check_many" else 1))
            return real(function, *args, **kwargs)

        monkeypatch.setattr(worker, "call", call)


def _check(evaluator: IsolatedEvaluator, task: Task, text: str) -> Any:
    return evaluator.check(AgentState(task), Action(text))


@pytest.fixture(params=sorted(KINDS))
def kind(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[IsolatedEvaluator, list[Task]]:
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "0")  # in this process only, unless a test turns it on
    make, tasks = KINDS[request.param]
    evaluator = make()
    yield evaluator, tasks()
    evaluator.close()


def test_a_repeated_check_is_answered_without_the_worker(kind: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    evaluator, tasks = kind
    task = tasks[0]
    first = _check(evaluator, task, task.reference)
    counting = _Counting(evaluator, monkeypatch)
    again = _check(evaluator, task, task.reference)
    assert again is first and counting.calls == [] and evaluator.memo.hits == 1
    assert evaluator.calls == 2  # the evaluator still counts every check it was asked for
    other_text = _check(evaluator, task, task.reference + "\n")
    other_task = _check(evaluator, tasks[1], task.reference)
    assert len(counting.calls) == 2 and other_text is not first and other_task is not first


def test_a_verdict_whose_worker_call_did_not_come_back_is_never_kept(
    kind: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluator, tasks = kind
    worker = evaluator._checks._get_worker()
    calls = []

    def killed(function: str, *args: Any, **kwargs: Any) -> WorkerResult:
        calls.append(function)
        return WorkerResult("cpu", error="more than the CPU budget (worker killed)", cpu_s=31.0)

    monkeypatch.setattr(worker, "call", killed)
    for _ in range(2):
        outcome = _check(evaluator, tasks[0], tasks[0].reference)
        assert outcome.status == "budget"
    assert calls == ["check", "check"] and len(evaluator.memo) == 0


def test_the_memo_can_be_turned_off_and_a_copy_starts_empty(
    kind: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluator, tasks = kind
    _check(evaluator, tasks[0], tasks[0].reference)
    assert len(evaluator.memo) == 1
    copy = pickle.loads(pickle.dumps(evaluator))
    assert len(copy.memo) == 0 and copy.memo.size == evaluator.memo.size
    copy.close()
    evaluator.memo.size = 0
    counting = _Counting(evaluator, monkeypatch)
    for _ in range(2):
        _check(evaluator, tasks[1], tasks[1].reference)
    assert len(counting.calls) == 2 and len(evaluator.memo) == 1


def test_a_batch_sends_only_what_is_not_kept(kind: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    evaluator, tasks = kind
    state = AgentState(tasks[0])
    texts = list(dict.fromkeys(t.reference for t in tasks))[:3]  # three different actions
    assert len(texts) == 3
    alone = _check(evaluator, tasks[0], texts[0])
    counting = _Counting(evaluator, monkeypatch)
    batch = evaluator.check_many(state, [Action(t) for t in texts])
    assert counting.calls == [("check_many", 2)] and batch[0] is alone
    assert evaluator.check_many(state, [Action(t) for t in texts]) == batch
    assert len(counting.calls) == 1  # the second batch was all kept


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", ["SAT", "SMT"])
def test_env_decisions_are_identical_with_and_without_the_memo(benchmark: str) -> None:
    from cm_gym.envs.selection import MemorySelectionEnv

    def trace(memo: bool) -> tuple[str, int]:
        env = MemorySelectionEnv(benchmark=benchmark)
        if not memo:
            env.evaluator.memo.size = 0
        rng = np.random.default_rng(3)
        out = []
        obs, info = env.reset(seed=3)
        for _ in range(150):
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            obs, reward, term, trunc, info = env.step(action)
            plain = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()}
            out.append(
                [
                    action,
                    obs.tolist(),
                    float(reward),
                    term,
                    trunc,
                    json.dumps(plain, sort_keys=True, default=str),
                ]
            )
            if term or trunc:
                obs, info = env.reset()
        hits = env.evaluator.memo.hits
        env.close()
        return hashlib.sha256(json.dumps(out).encode()).hexdigest(), hits

    without, no_hits = trace(memo=False)
    with_memo, hits = trace(memo=True)
    assert without == with_memo and no_hits == 0 and hits > 0


def test_a_fresh_process_reads_the_verdicts_an_earlier_one_kept(
    kind: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    evaluator, tasks = kind
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "1")
    first = [_check(evaluator, t, t.reference) for t in tasks[:3]]
    check_memo._work().close()  # as a new process: reopened, and read even if it was empty before
    fresh = type(evaluator)()  # another evaluator: an empty memo in this process
    try:
        counting = _Counting(fresh, monkeypatch)
        again = [_check(fresh, t, t.reference) for t in tasks[:3]]
        assert counting.calls == [] and fresh.memo.stored_hits == 3
        assert [_fields(o) for o in again] == [_fields(o) for o in first]
        other = type(evaluator)(cpu_limit_s=7.0)  # another scope: nothing shared
        try:
            _check(other, tasks[0], tasks[0].reference)
            assert other.memo.stored_hits == 0
        finally:
            other.close()
    finally:
        fresh.close()


def test_a_changed_file_is_not_answered_from_the_memo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cm_gym.domains.sat.loader import load_satlib_tasks

    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "1")
    folder = tmp_path / "sat" / "tiny"
    folder.mkdir(parents=True)
    cnf = folder / "a.cnf"
    cnf.write_text("p cnf 2 2\n1 2 0\n-1 2 0\n")
    task = load_satlib_tasks(root=tmp_path / "sat")[0]
    ev = SatEvaluator()
    try:
        assert _check(ev, task, task.reference).solved
    finally:
        ev.close()
    check_memo._work().close()  # as a new process: reopened, and read even if it was empty before
    cnf.write_text("p cnf 1 2\n1 0\n-1 0\n")  # now unsatisfiable: same path, other content
    ev = SatEvaluator()
    try:
        outcome = _check(ev, task, task.reference)
        assert ev.memo.stored_hits == 0 and outcome.details.get("verdict") == "unsat"
    finally:
        ev.close()


def test_an_undecodable_stored_verdict_is_checked_again(
    kind: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    evaluator, tasks = kind
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CM_GYM_WORK_MEMO", "1")
    first = _check(evaluator, tasks[0], tasks[0].reference)
    memo = check_memo._work()
    memo.flush()
    stored = evaluator.memo._stored_key(evaluator.memo.key(task_to_plain(tasks[0]), tasks[0].reference))
    with sqlite3.connect(memo.path) as conn:
        conn.execute("UPDATE memo SET value = ? WHERE key = ?", ('["not", "a verdict"]', stored))
    memo.close()
    fresh = type(evaluator)()
    try:
        again = _check(fresh, tasks[0], tasks[0].reference)
        assert fresh.memo.stored_hits == 0 and _fields(again) == _fields(first)
    finally:
        fresh.close()


def _fields(outcome: Any) -> tuple[Any, ...]:
    return (outcome.score, outcome.solved, outcome.feedback, outcome.status, outcome.reason, outcome.details)
