"""Where each LLM reply came from: real (a published output of a real system) or simulated.

A backend that knows marks its `Completion.provenance`: ``"real:<system>"`` for a real system's
published output used verbatim, ``"simulated"`` for a reply the simulator wrote, ``""`` when the
backend does not say (a live endpoint, the plain simulator). `ReplyCounts` tallies marked replies
per template, so a run can report how many of the replies its agent saw were real; the response
cache keeps the mark with the reply (`cm_gym.llm.cached`), so a replay counts the same.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from cm_gym.llm.base import Completion

REAL = "real"
SIMULATED = "simulated"


def real(system: str) -> str:
    """The provenance mark of a real system's published output."""
    return f"{REAL}:{system}"


def kind_of(provenance: str) -> str:
    """ "real", "simulated" or "" (unmarked) of a provenance mark."""
    head = provenance.partition(":")[0]
    return head if head in (REAL, SIMULATED) else ""


class ReplyCounts:
    """Thread-safe tallies of marked replies: per template, real vs simulated, and per real system."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, template: str, completion: Completion) -> None:
        """Count one reply (unmarked replies are not counted)."""
        if completion.provenance:
            with self._lock:
                self._counts[(template, completion.provenance)] += 1

    def as_dict(self) -> dict[str, Any]:
        """``{"real", "simulated", "by_template": {T: {"real", "simulated"}}, "real_by_system": {S: n}}``."""
        with self._lock:
            items = list(self._counts.items())
        return summarize(items)


def summarize(items: list[tuple[tuple[str, str], int]]) -> dict[str, Any]:
    """The `ReplyCounts.as_dict` form of ``((template, provenance), n)`` pairs."""
    out: dict[str, Any] = {REAL: 0, SIMULATED: 0, "by_template": {}, "real_by_system": {}}
    for (template, provenance), n in sorted(items):
        kind = kind_of(provenance)
        if not kind:
            continue
        out[kind] += n
        per = out["by_template"].setdefault(template, {REAL: 0, SIMULATED: 0})
        per[kind] += n
        if kind == REAL:
            system = provenance.partition(":")[2]
            out["real_by_system"][system] = out["real_by_system"].get(system, 0) + n
    return out


def reply_counts(llm: Any) -> dict[str, Any] | None:
    """The reply tallies of `llm`: those of the outermost layer (through wrappers that keep their
    backend as ``.inner``) that counted any marked reply, or None when none did."""
    for _ in range(8):
        if llm is None:
            return None
        counts = getattr(llm, "replies", None)
        if isinstance(counts, ReplyCounts):
            found = counts.as_dict()
            if found[REAL] or found[SIMULATED]:
                return found
        llm = getattr(llm, "inner", None)
    return None


def delta(after: Mapping[str, Any] | None, before: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The replies counted between two `reply_counts` snapshots (None when nothing was counted)."""
    if not after:
        return None
    before = before or {}
    old_t, old_s = before.get("by_template", {}), before.get("real_by_system", {})
    by_template = {}
    for template, per in after.get("by_template", {}).items():
        diff = {k: int(per.get(k, 0)) - int(old_t.get(template, {}).get(k, 0)) for k in (REAL, SIMULATED)}
        if any(diff.values()):
            by_template[template] = diff
    systems = {s: int(n) - int(old_s.get(s, 0)) for s, n in after.get("real_by_system", {}).items()}
    return {
        REAL: sum(d[REAL] for d in by_template.values()),
        SIMULATED: sum(d[SIMULATED] for d in by_template.values()),
        "by_template": by_template,
        "real_by_system": {s: n for s, n in systems.items() if n},
    }


def format_counts(counts: Mapping[str, Any] | None) -> str:
    """One line: how many replies were real (by system) and how many simulated (by template)."""
    if not counts:
        return ""
    systems = ", ".join(f"{s} {n:,}" for s, n in sorted(counts.get("real_by_system", {}).items()))
    simulated = ", ".join(
        f"{t} {per[SIMULATED]:,}"
        for t, per in sorted(counts.get("by_template", {}).items())
        if per.get(SIMULATED)
    )
    return (
        f"LLM replies: {counts.get(REAL, 0):,} real ({systems or 'none'}); "
        f"{counts.get(SIMULATED, 0):,} simulated ({simulated or 'none'})"
    )
