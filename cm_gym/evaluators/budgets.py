"""Deterministic budgets and the hang guard: the vocabulary every world model shares.

Every world model charges a check against a budget in a unit that does not depend on how busy
the machine is (`BUDGET_KINDS`: SQLite virtual-machine steps, SAT conflicts, z3 and Boogie
resource units, CPU seconds of the sandboxed processes) and keeps a wall-clock bound only as a
*hang guard*, far above what any budgeted check needs. A check stopped by its budget is the
action's failure (status "budget" or "timeout", the same on every machine); a check stopped by the
hang guard says nothing about the action: its status is `INFRASTRUCTURE`, the check is retried
once (`retry_once`), never cached, and the episode it happens in is left out of the metrics and
counted (`cm_gym.envs.metrics`). ``Outcome.details`` carries the verdict's `budget_kind`,
`budget_limit` and, where measured, `budget_used` (`budget_details`). See ``docs/budgets.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cm_gym.core.types import TRUNCATION, Outcome, truncate

logger = logging.getLogger(__name__)

#: the status of a check stopped by the wall-clock hang guard (twice): not the action's failure
INFRASTRUCTURE = "infrastructure"

SQLITE_STEPS = "sqlite-vm-steps"
SAT_CONFLICTS = "sat-conflicts"
Z3_RLIMIT = "z3-rlimit"
BOOGIE_RLIMIT = "boogie-rlimit"
CPU_SECONDS = "cpu-seconds"
#: every deterministic budget unit a world model may charge
BUDGET_KINDS = (SQLITE_STEPS, SAT_CONFLICTS, Z3_RLIMIT, BOOGIE_RLIMIT, CPU_SECONDS)


def budget_details(kind: str, limit: float | None, used: float | None = None) -> dict[str, Any]:
    """The ``Outcome.details`` entries that record which budget a verdict was charged against."""
    out: dict[str, Any] = {"budget_kind": kind, "budget_limit": limit}
    if used is not None:
        out["budget_used"] = round(used, 3) if isinstance(used, float) else used
    return out


def infrastructure(reason: str, **details: Any) -> Outcome:
    """The Outcome of a check the hang guard stopped (score 0, not solved, never cached)."""
    text = f"Infrastructure: {reason} (not the action's failure; the check is not scored)"
    return Outcome(
        0.0,
        False,
        truncate(text, TRUNCATION["feedback"]),
        status=INFRASTRUCTURE,
        reason=reason,
        details=details,
    )


def is_infrastructure(outcome: Outcome) -> bool:
    return outcome.status == INFRASTRUCTURE


def retry_once(check: Callable[[], Outcome], what: str = "check") -> Outcome:
    """Run `check`; when the hang guard stopped it, run it once more. A second infrastructure
    outcome is returned (logged), marked ``details["attempts"] = 2``."""
    outcome = check()
    if not is_infrastructure(outcome):
        return outcome
    logger.warning("%s stopped by its hang guard (%s); retrying once", what, outcome.reason)
    again = check()
    if not is_infrastructure(again):
        return replace(again, details={**dict(again.details), "retried": True})
    logger.warning("%s stopped by its hang guard twice: reported as infrastructure", what)
    return replace(again, details={**dict(again.details), "attempts": 2})
