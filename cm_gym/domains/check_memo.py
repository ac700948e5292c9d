"""Verdicts of the world models that check in a killable worker (SAT, SMT), kept in this process.

Why: the envs check the same actions of the same tasks over and over — in 1,000 random decisions
SAT-v0 made 1,260 checks of 200 distinct (task, action) pairs and SMT-v0 749 of 188 over 600 —
and each check is a round trip to the worker plus the solve. A check is deterministic: conflicts
(SAT) and z3's resource count (SMT) bound the search, never the clock, and the worker keeps each
task's formula for its lifetime. So the verdict is a function of the evaluator's configuration
(one memo per `IsolatedChecks`), the task and the action text.

The key is the task as the worker receives it (its plain-data pickle: id, prompt, reference,
features, meta — a DIMACS or SMT-LIB *path*, as the worker's own per-path caches use it) and the
text. What is never kept: any verdict from a worker call that did not come back (the hang guard's
"infrastructure", a kill at the CPU backstop or the memory cap, a crash): those depend on the
machine. A kept verdict is the same `Outcome` object (Outcomes are never mutated after a check).
`size` 0 turns the memo off (the world-model benches do, to time every check).
"""

from __future__ import annotations

import pickle
from typing import Any

from cm_gym.core.types import Outcome

#: verdicts kept per evaluator (oldest dropped first)
CHECK_MEMO = 16_384


class CheckMemo:
    """Verdicts by (task payload, action text); `size` 0 = off."""

    def __init__(self, size: int = CHECK_MEMO) -> None:
        self.size = size
        self.hits = 0
        self._verdicts: dict[tuple[bytes, str], Outcome] = {}

    def __len__(self) -> int:
        return len(self._verdicts)

    def __getstate__(self) -> dict[str, Any]:  # a pickled evaluator starts empty
        return {"size": self.size, "hits": 0, "_verdicts": {}}

    def key(self, plain_task: dict[str, Any], text: str) -> tuple[bytes, str] | None:
        """The key of checking `text` for the task the worker would receive (None: memo off, or a
        task that cannot be pickled: it goes to the worker, which reports why)."""
        if self.size <= 0:
            return None
        try:
            return pickle.dumps(plain_task, protocol=5), text
        except Exception:  # noqa: BLE001 - checked (and refused) by the worker call instead
            return None

    def get(self, key: tuple[bytes, str] | None) -> Outcome | None:
        """The kept verdict, or None."""
        if key is None:
            return None
        found = self._verdicts.get(key)
        if found is not None:
            self.hits += 1
        return found

    def put(self, key: tuple[bytes, str] | None, outcome: Outcome) -> None:
        """Keep a verdict the worker returned (the caller decides it is repeatable)."""
        if key is None or outcome.status == "infrastructure":
            return
        if len(self._verdicts) >= self.size:
            del self._verdicts[next(iter(self._verdicts))]
        self._verdicts[key] = outcome
