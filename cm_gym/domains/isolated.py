"""Run a domain evaluator's check in the shared killable worker (`cm_gym.evaluators.worker`).

For world models whose engine runs in-process and cannot always interrupt itself (z3 under a
resource limit that is not time, a SAT solver on a huge clause set): the whole check runs in a
reused worker process with a hard wall-clock deadline and a memory cap, and comes back as plain
data. The parent never raises: a deadline gives an Outcome with status "timeout", the memory cap
"budget", a crash "error"; the worker is restarted on the next check.

A domain's *engine module* (e.g. ``cm_gym.domains.smt.engine``) defines
``check(config: dict, task: dict, text: str) -> dict`` that builds its evaluator with
``isolated=False`` from `config`, checks, and returns `outcome_to_plain(outcome)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cm_gym.types import Outcome, Task

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


class IsolatedChecks:
    """A domain engine's `check` in one reused worker: `time_limit_s` of wall clock and
    `memory_mb` of memory (beyond the worker's start-up size) per check."""

    def __init__(
        self,
        module: str,
        config: Mapping[str, Any],
        *,
        time_limit_s: float,
        memory_mb: int,
        track_memory: bool = False,
    ) -> None:
        self.module, self.config = module, dict(config)
        self.time_limit_s, self.memory_mb = float(time_limit_s), int(memory_mb)
        self.track_memory = track_memory  # measure each check's peak memory (costs ~0.15 ms)
        self._worker: Any = None
        self.last_wall_s = 0.0
        self.last_peak_mb: float | None = None

    def _get_worker(self) -> Any:
        if self._worker is None:
            from cm_gym.evaluators.worker import Worker

            self._worker = Worker(self.module, memory_mb=self.memory_mb, track_memory=self.track_memory)
        return self._worker

    def check(self, task: Task, text: str) -> Outcome:
        """The engine's Outcome for (task, text), or a "timeout" / "budget" / "error" Outcome."""
        res = self._get_worker().call(
            "check", self.config, task_to_plain(task), text, timeout=self.time_limit_s
        )
        self.last_wall_s, self.last_peak_mb = res.wall_s, res.peak_rss_mb
        if res.ok:
            return outcome_from_plain(res.value)
        if res.status == "timeout":
            reason = f"the check ran past its wall-clock bound of {self.time_limit_s:g} s and was stopped"
        elif res.status == "budget":
            reason = f"the check exceeded its memory cap of {self.memory_mb} MB and was stopped"
        else:
            reason = f"the check failed: {res.error}"
        return Outcome(
            0.0, False, reason, res.status if res.status in ("timeout", "budget") else "error", reason
        )

    def close(self) -> None:
        """Stop the worker process (the next check starts a new one)."""
        if self._worker is not None:
            self._worker.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_worker"] = None  # a copy in another process starts its own worker
        return state
