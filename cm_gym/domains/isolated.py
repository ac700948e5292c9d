"""Run a domain evaluator's check in the shared killable worker (`cm_gym.evaluators.worker`).

For world models whose engine runs in-process and cannot always interrupt itself (z3 under a
resource limit that is not time, a SAT solver on a huge clause set): the whole check runs in a
reused worker process under a CPU-time backstop, a memory cap and a wall-clock hang guard, and
comes back as plain data. The domain's own deterministic budget (conflicts, rlimit) bounds the
search; the CPU backstop stops a check that spends CPU without spending that budget (status
"budget": the action's failure, the same on a busy machine); the hang guard, far above it, stops
a check the machine starved (status "infrastructure", retried once: `cm_gym.evaluators.budgets`).
The parent never raises: a crash is an "error" Outcome; the worker is restarted on the next check.

A domain's *engine module* (e.g. ``cm_gym.domains.smt.engine``) defines
``check(config: dict, task: dict, text: str) -> dict``, usually ``check_here(Evaluator, ...)``:
the evaluator built with ``isolated=False`` checks in the worker and the Outcome comes back plain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.check_memo import CheckMemo
from cm_gym.evaluators.budgets import infrastructure, retry_once

TASK_FIELDS = ("task_id", "domain", "prompt", "env_id", "reference", "context", "family")


def task_to_plain(task: Task) -> dict[str, Any]:
    """The task as plain data for the worker (features and meta as dicts)."""
    out: dict[str, Any] = {name: getattr(task, name) for name in TASK_FIELDS}
    out["features"], out["meta"] = dict(task.features), dict(task.meta)
    return out


def outcome_to_plain(outcome: Outcome) -> dict[str, Any]:
    """An Outcome as plain data (what the worker sends back)."""
    return {
        "score": float(outcome.score),
        "solved": bool(outcome.solved),
        "feedback": outcome.feedback,
        "status": outcome.status,
        "reason": outcome.reason,
        "details": dict(outcome.details),
    }


def outcome_from_plain(value: Any) -> Outcome:
    """The Outcome a worker sent (a malformed reply is an "error" Outcome, never an exception)."""
    reason = "the checking worker sent a malformed result"
    try:
        score = float(value["score"])
        details = value.get("details", {})
        if not 0.0 <= score <= 1.0:
            return Outcome(0.0, False, reason, "error", reason)
        return Outcome(
            score,
            bool(value["solved"]),
            str(value.get("feedback", "")),
            str(value.get("status", "ok")),
            str(value.get("reason", "")),
            dict(details) if isinstance(details, Mapping) else {},
        )
    except (AttributeError, KeyError, TypeError, ValueError):
        return Outcome(0.0, False, reason, "error", reason)


_HERE: dict[tuple[Any, ...], Any] = {}


def check_here(
    make: Callable[..., Any], config: Mapping[str, Any], task: Mapping[str, Any], text: str
) -> dict:
    """The worker side of a domain engine's ``check``: `make(**config, isolated=False)` (built once
    per configuration, so its caches live as long as the worker) checks `text` for `task`."""
    key = (make, tuple(sorted(config.items())))
    evaluator = _HERE.get(key)
    if evaluator is None:
        evaluator = _HERE[key] = make(**config, isolated=False)
    return outcome_to_plain(evaluator.check_here(Task(**task), text))


def check_many_here(
    make: Callable[..., Any], config: Mapping[str, Any], items: list[tuple[Mapping[str, Any], str]]
) -> list[dict]:
    """`check_here` for a batch of (task, text) pairs in one worker call."""
    return [check_here(make, config, task, text) for task, text in items]


class IsolatedChecks:
    """A domain engine's `check` in one reused worker: `cpu_limit_s` of the worker's CPU time
    (the backstop), `memory_mb` of memory (beyond the worker's start-up size) and `time_limit_s`
    of wall clock (the hang guard) per check."""

    def __init__(
        self,
        module: str,
        config: Mapping[str, Any],
        *,
        time_limit_s: float,
        memory_mb: int,
        cpu_limit_s: float | None = None,
        track_memory: bool = False,
    ) -> None:
        self.module, self.config = module, dict(config)
        self.time_limit_s, self.memory_mb = float(time_limit_s), int(memory_mb)
        self.cpu_limit_s = float(cpu_limit_s) if cpu_limit_s is not None else None
        self.track_memory = track_memory  # measure each check's peak memory (costs ~0.15 ms)
        self._worker: Any = None
        self.last_wall_s = 0.0
        self.last_peak_mb: float | None = None
        self.local_checks = 0  # checks run in this process (`check_local`)
        #: kept verdicts (`cm_gym.domains.check_memo`; ``memo.size = 0`` turns it off)
        scope = [module, self.config, self.cpu_limit_s, self.memory_mb]
        self.memo = CheckMemo(json.dumps(scope, sort_keys=True, default=repr))

    def _get_worker(self) -> Any:
        if self._worker is None:
            from cm_gym.evaluators.worker import Worker

            # the engines (z3, python-sat) start no process: the worker's own CPU clock meters it
            self._worker = Worker(
                self.module, memory_mb=self.memory_mb, track_memory=self.track_memory, children_cpu=False
            )
        return self._worker

    def check(self, task: Task, text: str) -> Outcome:
        """The engine's Outcome for (task, text), or a "budget" / "error" Outcome; a check the hang
        guard stopped is retried once, then it is an "infrastructure" Outcome. A verdict the
        worker returned is kept (`memo`) and a repeated check answered from it."""
        plain = task_to_plain(task)
        key = self.memo.key(plain, text)
        kept = self.memo.get(key)
        if kept is not None:
            return kept
        came_back: list[bool] = []
        outcome = retry_once(lambda: self._check_once(plain, text, came_back), f"{self.module} check")
        if came_back and came_back[-1]:
            self.memo.put(key, outcome)
        return outcome

    def check_local(self, task: Task, text: str, local: Callable[[Task, str], Outcome]) -> Outcome:
        """`local(task, text)` in this process, for a check its evaluator bounded a priori (no
        round trip: `IsolatedEvaluator.bounded`), through the same kept verdicts as `check`."""
        self.local_checks += 1
        key = self.memo.key(task_to_plain(task), text) if self.memo.size > 0 else None
        kept = self.memo.get(key)
        if kept is not None:
            return kept
        outcome = local(task, text)
        self.memo.put(key, outcome)
        return outcome

    def _check_once(self, plain: dict[str, Any], text: str, came_back: list[bool]) -> Outcome:
        res = self._get_worker().call(
            "check",
            self.config,
            plain,
            text,
            timeout=self.time_limit_s,
            cpu_budget_s=self.cpu_limit_s,
        )
        self.last_wall_s, self.last_peak_mb = res.wall_s, res.peak_rss_mb
        came_back.append(res.ok)
        if res.ok:
            return outcome_from_plain(res.value)
        if res.status == "timeout":
            return infrastructure(
                f"the check ran past its wall-clock hang guard of {self.time_limit_s:g} s "
                f"(after {res.cpu_s if res.cpu_s is not None else '?'} s of CPU) and was stopped",
                hang_guard_s=self.time_limit_s,
            )
        if res.status == "cpu":
            reason = (
                f"the check used more than its {self.cpu_limit_s:g} s of CPU time without deciding "
                "and was stopped"
            )
            status = "budget"
        elif res.status == "budget":
            reason = f"the check exceeded its memory cap of {self.memory_mb} MB and was stopped"
            status = "budget"
        else:
            reason, status = f"the check failed: {res.error}", "error"
        return Outcome(0.0, False, reason, status, reason, {"cpu_limit_s": self.cpu_limit_s})

    def check_many(self, items: list[tuple[Task, str]]) -> list[Outcome]:
        """Outcomes for many (task, text) pairs: kept verdicts from `memo`, the others in one
        worker call when the whole batch ends within one check's bounds; otherwise (or on any
        failure) one bounded call per pair."""
        plains = [task_to_plain(task) for task, _ in items]
        keys = [self.memo.key(plain, text) for plain, (_, text) in zip(plains, items, strict=True)]
        out: list[Outcome | None] = [self.memo.get(key) for key in keys]
        todo = [i for i, found in enumerate(out) if found is None]
        if len(todo) > 1:
            payload = [(plains[i], items[i][1]) for i in todo]
            res = self._get_worker().call(
                "check_many", self.config, payload, timeout=self.time_limit_s, cpu_budget_s=self.cpu_limit_s
            )
            if res.ok and isinstance(res.value, list) and len(res.value) == len(todo):
                for i, value in zip(todo, res.value, strict=True):
                    out[i] = outcome_from_plain(value)
                    self.memo.put(keys[i], out[i])
                todo = []
        for i in todo:
            out[i] = self.check(*items[i])
        return [o for o in out if o is not None]

    def close(self) -> None:
        """Stop the worker process (the next check starts a new one)."""
        if self._worker is not None:
            self._worker.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_worker"] = None  # a copy in another process starts its own worker
        return state


class IsolatedEvaluator:
    """The `Evaluator` methods shared by world models that check in `IsolatedChecks` (SAT, SMT):
    one check, batches of checks in one worker round trip, closing the worker. A subclass sets
    `calls`, `isolated` and `_checks`, defines `check_here(task, text)` and may refuse an action
    before any round trip (`refusal`)."""

    calls: int
    isolated: bool
    _checks: IsolatedChecks

    def check_here(self, task: Task, text: str) -> Outcome:  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def refusal(self, text: str) -> Outcome | None:
        """The Outcome that refuses `text` without checking it (None: check it). Default: None."""
        return None

    def bounded(self, task: Task, text: str) -> bool:
        """Whether checking `text` for `task` is bounded before it runs, so that it may run in
        this process without the worker's backstops (same verdict, no round trip). Default:
        never."""
        return False

    def check(self, state: AgentState, action: Action) -> Outcome:
        """Score `action` for `state.task` (never raises; never mutates the state)."""
        self.calls += 1
        text = action.text if isinstance(action, Action) else str(action)
        refused = self.refusal(text)
        if refused is not None:
            return refused
        if not self.isolated:
            return self.check_here(state.task, text)
        if self.bounded(state.task, text):
            return self._checks.check_local(state.task, text, self.check_here)
        return self._checks.check(state.task, text)

    def close(self) -> None:
        """Stop the checking worker (the next check starts a new one)."""
        self._checks.close()

    @property
    def memo(self) -> CheckMemo:
        """The kept verdicts of isolated checks (``memo.size = 0`` turns keeping off)."""
        return self._checks.memo

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        """The optional `Evaluator` batch: independent actions from one state (construction's
        alternatives), in one worker round trip when they all end within one check's bounds."""
        return self.check_batch([(state, action) for action in actions])

    def check_batch(self, pairs: Sequence[tuple[AgentState, Action]]) -> list[Outcome]:
        """`check` for many (state, action) pairs, in one worker round trip where the batch ends
        within one check's bounds (each pair is checked alone otherwise): for loaders probing
        every reference of a folder."""
        self.calls += len(pairs)
        items = [(state.task, action.text) for state, action in pairs]
        if not self.isolated:
            return [self.check_here(task, text) for task, text in items]
        here = [self.bounded(task, text) for task, text in items]
        out = iter(self._checks.check_many([item for item, h in zip(items, here, strict=True) if not h]))
        return [
            self._checks.check_local(task, text, self.check_here) if h else next(out)
            for (task, text), h in zip(items, here, strict=True)
        ]
