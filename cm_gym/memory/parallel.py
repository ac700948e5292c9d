"""Construction in parallel, byte-identical to the serial build (issue 16.3).

Construction is sequential by nature: a task's retrieval (and so its revised actions, their
outcomes, the alternatives expanded and the records admitted) reads the store as the earlier tasks
left it, and reuse updates and admissions change it for the tasks after. So the store is written
by one writer, in task order, running exactly the serial algorithm (`build_memory`); what runs in
parallel is the expensive part of each task — LLM calls and world-model checks — done ahead,
speculatively:

1. **Speculate.** While the writer works on task i, worker processes run tasks i+1 … i+W through the
   whole serial algorithm against a private copy of the store as last committed, recording every
   LLM reply and every evaluator outcome, keyed by the full content of the call (template and
   fields; state and action).
2. **Validate and replay.** Before task j, the writer waits for j's recording if a worker has it —
   at most as long as computing task j itself takes (its mean so far) — else it goes on without
   (and cancels it); then it runs task j for real. Each LLM call and check it makes is looked up by its content: a hit *is* the result the
   call returns (both are deterministic functions of that content: the simulated LLM is seeded by
   it, a real LLM replays through the response cache, evaluators check a fork), a miss — the
   speculation saw an older store, retrieved another record, and so made other calls — is
   computed live by the writer (the task is redone where it was stale, and only there).

The writer's execution is therefore the serial execution, call for call, and the store is the same
file (`SOURCE_DATE_EPOCH` pins the one wall-clock field, its creation time). `ParallelStats`
counts hits and misses. What this costs: W speculative copies of each task's work, some of it
discarded; with a real LLM behind a writable cache a discarded speculation may have paid for calls
the serial build never makes (replay from a tabulated cache in "ro" mode to avoid that).

`make_llm` / `make_evaluator` are picklable factories (module-level functions or
`functools.partial` of them): the writer and every worker build their LLM and evaluator from the
same recipe, so a hit never stands for a differently configured model.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import logging
import math
import multiprocessing
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.core.types import Action, AgentState, Evaluator, Outcome, Task, check_all
from cm_gym.domains.base import Domain
from cm_gym.llm.base import LLM, Completion
from cm_gym.memory.alternatives import AlternativesParser
from cm_gym.memory.construction import ConstructionConfig, ProgressFn, build_memory
from cm_gym.memory.distill import DistilParser
from cm_gym.memory.errors import StoreError
from cm_gym.memory.schema import sqlite_bytes
from cm_gym.memory.store import RecordStore
from cm_gym.memory.summary import BuildSummary

logger = logging.getLogger(__name__)

Memo = dict[str, Any]


def call_key(kind: str, *parts: Any) -> str:
    """The content key of one call: sha256 of the repr of everything the call reads (frozen
    dataclasses and plain data: deterministic across processes). A repr that differs where the
    content does not only costs a miss, never a wrong hit."""
    return hashlib.sha256(repr((kind, parts)).encode("utf-8", "backslashreplace")).hexdigest()


@dataclass
class ParallelStats:
    """What the speculation saved: calls answered from a recording (hits) vs computed by the
    writer (misses), tasks speculated, and the writer's waits."""

    workers: int = 0
    speculated: int = 0
    hits: int = 0
    misses: int = 0
    wait_seconds: float = 0.0
    speculation_errors: int = 0
    late: int = 0  # tasks the writer computed itself rather than wait longer for their recording

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass
class _Calls:
    """A memo shared by a `MemoLLM` and a `MemoEvaluator`: recorded results and hit counters."""

    memo: Memo = field(default_factory=dict)
    record: bool = False
    hits: int = 0
    misses: int = 0

    def lookup(self, key: str, compute: Callable[[], Any]) -> Any:
        if key in self.memo:
            self.hits += 1
            return self.memo[key]
        self.misses += 1
        value = compute()
        if self.record:
            self.memo[key] = value
        return value


class MemoLLM:
    """An LLM whose replies come from `calls.memo` when recorded there (else from `inner`)."""

    def __init__(self, inner: LLM, calls: _Calls) -> None:
        self.inner, self.calls = inner, calls
        self.name = getattr(inner, "name", type(inner).__name__)

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        key = call_key("llm", template, sorted(fields.items()))
        return self.calls.lookup(key, lambda: self.inner.complete(template, fields))

    def __getattr__(self, name: str) -> Any:  # identity, stats, … of the wrapped LLM
        return getattr(self.inner, name)


class MemoEvaluator:
    """An evaluator whose outcomes come from `calls.memo` when recorded there (else `inner`);
    ``check_many`` looks each action up and checks the misses together."""

    def __init__(self, inner: Evaluator, calls: _Calls) -> None:
        self.inner, self.calls = inner, calls

    def check(self, state: AgentState, action: Action) -> Outcome:
        return self.calls.lookup(call_key("check", state, action), lambda: self.inner.check(state, action))

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        keys = [call_key("check", state, a) for a in actions]
        missing = [i for i, k in enumerate(keys) if k not in self.calls.memo]
        fresh = dict(zip(missing, check_all(self.inner, state, [actions[i] for i in missing]), strict=True))
        out = []
        for i, key in enumerate(keys):
            out.append(self.calls.lookup(key, lambda i=i: fresh[i]))
        return out


# -- worker side ---------------------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _init_worker(
    domain: Domain,
    make_llm: Callable[[], LLM],
    make_evaluator: Callable[[], Evaluator],
    config: ConstructionConfig,
    agent_kind: str,
    max_decisions: int,
    parsers: tuple[AlternativesParser | None, DistilParser | None],
) -> None:
    logging.getLogger("cm_gym").setLevel(logging.WARNING)  # the writer logs admissions, not speculation
    _WORKER.update(
        domain=domain,
        llm=make_llm(),
        evaluator=make_evaluator(),
        config=config,
        agent_kind=agent_kind,
        max_decisions=max_decisions,
        parsers=parsers,
    )


def _speculate(task: Task, store_bytes: bytes) -> Memo:
    """Run `task` through the serial algorithm against a private copy of the store; return every
    LLM reply and outcome it produced, by call key."""
    w = _WORKER
    calls = _Calls(record=True)
    with tempfile.TemporaryDirectory(prefix="cm_gym-speculate-") as tmp:
        path = Path(tmp) / "store.sqlite"
        path.write_bytes(store_bytes)
        with RecordStore(path) as store:
            build_memory(
                w["domain"],
                [task],
                store,
                MemoLLM(w["llm"], calls),
                MemoEvaluator(w["evaluator"], calls),
                w["config"],
                agent_kind=w["agent_kind"],
                max_decisions=w["max_decisions"],
                alternatives_parser=w["parsers"][0],
                distil_parser=w["parsers"][1],
            )
    return calls.memo


#: the committed state of a (WAL-mode) store file, as a consistent single-file copy
store_bytes = sqlite_bytes


# -- writer side ---------------------------------------------------------------------------------
def _stop(pool: cf.ProcessPoolExecutor, futures: Any) -> None:
    """Stop the workers now: what they still compute (speculation of tasks already built, or
    still starting up) is of no use, so waiting for it would only add to the build's time."""
    for future in futures:
        future.cancel()
    processes = list((getattr(pool, "_processes", None) or {}).values())  # our own workers
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)


def _patience(future: cf.Future[Memo], limit: float) -> float | None:
    """How long to wait for `future`: up to `limit` (None: no limit) once a worker has it; not at
    all while it still waits for a worker (the writer has caught up with them: computing the task
    itself is faster than waiting for a worker to start it, and cancelling frees that worker)."""
    if not future.running() and not future.done() and not math.isinf(limit):
        return 0.0
    return None if math.isinf(limit) else limit


class _LiveClock:
    """The writer's mean time for a task it computed without a recording: how long waiting for a
    recording may take before computing the task here is the faster way (0 until measured: the
    first tasks run while the workers start)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.total, self.count = 0.0, 0

    def task_starts(self) -> None:
        self.started = time.perf_counter()

    def task_ends(self, had_recording: bool) -> None:
        if self.started is not None and not had_recording:
            self.total += time.perf_counter() - self.started
            self.count += 1
        self.started = None

    def estimate(self) -> float:
        return self.total / self.count if self.count else 0.0


def build_memory_parallel(
    domain: Domain,
    tasks: Sequence[Task],
    store: RecordStore,
    make_llm: Callable[[], LLM],
    make_evaluator: Callable[[], Evaluator] | None = None,
    config: ConstructionConfig | None = None,
    agent_kind: str = "react",
    max_decisions: int = 3,
    progress: ProgressFn | None = None,
    *,
    workers: int = 2,
    checkpoints: Sequence[int] = (),
    checkpoint_dir: str | Path | None = None,
    alternatives_parser: AlternativesParser | None = None,
    distil_parser: DistilParser | None = None,
    stats: ParallelStats | None = None,
    patience: float | None = None,
) -> BuildSummary:
    """`build_memory` with `workers` speculation processes (module docstring); the store ends
    byte-identical to the serial build's. `make_evaluator` defaults to the domain's
    `make_evaluator`. Pass a `ParallelStats` to read the hit counts. `patience`: the most seconds
    the writer waits for a task's recording before computing the task itself (None: its own mean
    time for a task computed without one; ``math.inf``: always wait). Any value gives the same
    store; it only trades waiting against recomputing."""
    cfg = config or ConstructionConfig()
    make_eval: Callable[[], Evaluator] = make_evaluator or domain.make_evaluator
    stats = stats if stats is not None else ParallelStats()
    stats.workers = max(1, int(workers))
    if store.read_only:
        raise StoreError("build_memory_parallel needs a writable RecordStore, not a frozen snapshot")
    todo = [t for t in tasks if t.task_id not in store.processed_task_ids]
    index = {t.task_id: i for i, t in enumerate(todo)}
    calls = _Calls()
    pool = cf.ProcessPoolExecutor(
        stats.workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(
            domain,
            make_llm,
            make_eval,
            cfg,
            agent_kind,
            max_decisions,
            (alternatives_parser, distil_parser),
        ),
    )
    pending: dict[int, cf.Future[Memo]] = {}
    submitted = 0
    broken: list[bool] = []

    def submit_until(last: int) -> None:
        nonlocal submitted
        snapshot: bytes | None = None
        while submitted <= min(last, len(todo) - 1) and not broken:
            snapshot = snapshot if snapshot is not None else store_bytes(store.path)
            try:
                pending[submitted] = pool.submit(_speculate, todo[submitted], snapshot)
            except BrokenProcessPool:  # a worker died or could not start: the writer goes on alone
                broken.append(True)
                logger.warning("speculation workers are gone; the writer builds the rest serially")
                return
            stats.speculated += 1
            submitted += 1

    live = _LiveClock()

    def before_task(task: Task) -> None:
        i = index[task.task_id]
        live.task_ends(bool(calls.memo))
        calls.memo.clear()
        future = pending.pop(i, None)
        submit_until(i + stats.workers)  # keep the workers busy with the next tasks
        started = time.perf_counter()
        try:
            if future is not None:
                timeout = _patience(future, live.estimate() if patience is None else patience)
                calls.memo.update(future.result(timeout=timeout))
        except cf.TimeoutError:
            stats.late += 1
            future.cancel()  # frees its worker for the next tasks when none has started it
        except Exception as exc:  # noqa: BLE001 - a failed speculation only loses its head start
            stats.speculation_errors += 1
            logger.warning("speculation of %s failed (%s); the writer computes it", task.task_id, exc)
        stats.wait_seconds += time.perf_counter() - started
        live.task_starts()

    try:
        submit_until(stats.workers - 1)
        summary = build_memory(
            domain,
            tasks,
            store,
            MemoLLM(make_llm(), calls),
            MemoEvaluator(make_eval(), calls),
            cfg,
            agent_kind=agent_kind,
            max_decisions=max_decisions,
            progress=progress,
            checkpoints=checkpoints,
            checkpoint_dir=checkpoint_dir,
            alternatives_parser=alternatives_parser,
            distil_parser=distil_parser,
            before_task=before_task,
        )
    finally:
        _stop(pool, pending.values())
    stats.hits, stats.misses = calls.hits, calls.misses
    logger.info(
        "parallel construction: %d tasks speculated by %d workers, %.0f%% of calls replayed (%d hits, %d misses)",
        stats.speculated,
        stats.workers,
        100 * stats.hit_rate,
        stats.hits,
        stats.misses,
    )
    return summary
