"""Prompt fields: truncation limits, string forms of structured fields, derivation of missing string
fields from the in-process `task` / `state` objects, and the record rendering.

Rendering reads only string fields; when a string field is missing it is derived from the objects
(e.g. ``failed_attempts`` from the state), so the rendered text carries everything a server-side
backend needs to answer exactly as an in-process one would.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from cm_gym.core.types import TRUNCATION, AgentState, Task, truncate
from cm_gym.llm.prompts_mechanisms import MECHANISM_FIELD_LIMITS

logger = logging.getLogger(__name__)

DEFAULT_ACTION_FORMAT = "Return only the action, in one fenced code block."
DEFAULT_K = 4

#: Which SPEC §3 limit truncates each field (others: `_SHORT_LIMIT` characters).
FIELD_LIMITS: Mapping[str, int] = {
    "question": TRUNCATION["state"],
    "state_text": TRUNCATION["state"],
    "context": TRUNCATION["context"],
    "draft": TRUNCATION["draft"],
    "action": TRUNCATION["action"],
    "last_action": TRUNCATION["action"],
    "a_minus": TRUNCATION["action"],
    "a_plus": TRUNCATION["action"],
    "record_a_minus": TRUNCATION["action"],
    "record_a_plus": TRUNCATION["action"],
    "feedback": TRUNCATION["feedback"],
    "decision_units": TRUNCATION["decision_units"],
    "record": TRUNCATION["record"],
    # REVISE_WITH_RECORDS: each of the two records and its contrast, at the one-record limits
    **{f"record_{i}": TRUNCATION["record"] for i in (1, 2)},
    **{f"record_{i}_{side}": TRUNCATION["action"] for i in (1, 2) for side in ("a_minus", "a_plus")},
    "evidence": TRUNCATION["record"],
    "predicate_kinds": TRUNCATION["context"],
    # the N candidates are each cut to the action limit; N is small (Best-of-N uses 1 + K = 5)
    "candidates": 5 * TRUNCATION["action"] + 200,
    **MECHANISM_FIELD_LIMITS,
}
_SHORT_LIMIT = 300

#: Per-field limits inside a rendered record, chosen so that the whole record fits the 1200
#: character record limit *without* a final cut: RECORD_RENDER and RECORD_RENDER_NO_CONDITION then
#: differ only by the condition clause, never by where a truncation happened to fall.
RECORD_FIELD_LIMITS: Mapping[str, int] = {
    "situation": 160,
    "condition": 200,
    "a_minus": 320,
    "a_plus": 320,
    "evidence": 110,
}

#: Generic condition predicate kinds of the condition grammar (implemented in `cm_gym.memory`).
GENERIC_PREDICATE_KINDS: Mapping[str, str] = {
    "mentions_any": 'mentions_any("phrase", ...): the question mentions any phrase (whole words, any case)',
    "mentions_none": 'mentions_none("phrase", ...): the question mentions none of the phrases',
    "same_env": 'same_env("env_id"): the task runs in this environment',
    "different_env": 'different_env("env_id"): the task runs in another environment',
    "feature_equals": 'feature_equals("key", value): the task feature key has this value',
    "feature_in": 'feature_in("key", v1, v2, ...): the task feature key has one of these values',
    "family_is": 'family_is("family"): the task belongs to this family',
}


def format_evidence(evidence: Any) -> str:
    """One line of evidence: scores before/after and the checker's feedback on both actions."""
    if not isinstance(evidence, Mapping):
        return str(evidence)
    parts: list[str] = []
    if "score_minus" in evidence or "score_plus" in evidence:
        parts.append(
            f"checked from the same state: score {_num(evidence.get('score_minus'))} -> "
            f"{_num(evidence.get('score_plus'))}"
        )
    for key, label in (("feedback_minus", "a- feedback"), ("feedback_plus", "a+ feedback")):
        if evidence.get(key):
            parts.append(f"{label}: {evidence[key]}")
    known = {"score_minus", "score_plus", "feedback_minus", "feedback_plus"}
    parts.extend(f"{k}: {evidence[k]}" for k in sorted(evidence) if k not in known)
    return "; ".join(parts)


def _num(value: Any) -> str:
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return "?"


def format_candidates(candidates: Sequence[str]) -> str:
    """Numbered candidate actions for BEST_OF_N_JUDGE, each cut to the action limit."""
    return "\n\n".join(
        f"[{i}]\n{truncate(str(c), TRUNCATION['action'])}" for i, c in enumerate(candidates, start=1)
    )


def format_units(units: Sequence[str]) -> str:
    """Decision units, one per entry, numbered for reference."""
    return "\n".join(f"({i}) {u}" for i, u in enumerate(units, start=1))


def predicate_kinds_text(domain_kinds: Mapping[str, Any] | Sequence[str] = ()) -> str:
    """The predicate kinds available in conditions: the generic ones plus a domain's own kinds
    (described by the first line of the predicate function's docstring when it has one)."""
    lines = list(GENERIC_PREDICATE_KINDS.values())
    items = domain_kinds.items() if isinstance(domain_kinds, Mapping) else ((k, None) for k in domain_kinds)
    for kind, fn in items:
        if kind in GENERIC_PREDICATE_KINDS:
            continue
        doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
        lines.append(f"{kind}(...)" + (f": {doc[0]}" if doc else ""))
    return "\n".join(lines)


def _domain_of(task: Task | None) -> Any:
    if task is None:
        return None
    from cm_gym.domains.registry import get_domain  # lazy: the registry loads every domain plugin

    try:
        return get_domain(task.domain)
    except Exception:  # noqa: BLE001 - a prompt must render even if the domain is not registered
        logger.warning(
            "domain %r of task %s is not registered; using generic prompt fields", task.domain, task.task_id
        )
        return None


def _derive(name: str, fields: Mapping[str, Any]) -> Any:
    task = fields.get("task") if isinstance(fields.get("task"), Task) else None
    state = fields.get("state") if isinstance(fields.get("state"), AgentState) else None
    if task is None and state is not None:
        task = state.task
    if name == "task_id":
        return task.task_id if task else ""
    if name == "agent":
        return "react"
    if name == "decision":
        return state.decision if state else 0
    if name == "failed_attempts":
        return sum(1 for a in state.attempts if not a.outcome.solved) if state else 0
    if name == "state_text":
        if state is not None:
            return state.render()
        return f"Task: {task.prompt}" if task else fields.get("question", "")
    if name == "question":
        return task.prompt if task else ""
    if name == "context":
        return task.context if task else ""
    if name in ("feedback", "last_action"):
        last = state.attempts[-1] if state and state.attempts else None
        if last is None:
            return ""
        return last.outcome.feedback if name == "feedback" else last.action
    if name in ("action_kind", "action_format", "decision_units", "predicate_kinds"):
        domain = _domain_of(task)
        if name == "action_kind":
            return getattr(domain, "action_kind", "action")
        if name == "action_format":
            return getattr(domain, "action_format", DEFAULT_ACTION_FORMAT)
        if name == "decision_units":
            action = str(fields.get("action", ""))
            units = domain.decision_units(action) if domain else action.splitlines()
            return [u for u in units if u.strip()] or [action]
        return predicate_kinds_text(domain.condition_predicates() if domain else ())
    if name == "k":
        return DEFAULT_K
    if name == "n":
        candidates = fields.get("candidates")
        return len(candidates) if isinstance(candidates, Sequence) and not isinstance(candidates, str) else 1
    logger.debug("prompt field %r missing; rendering it empty", name)
    return ""


def to_text(name: str, value: Any) -> str:
    """The string form of a field value (evidence dicts, candidate and unit lists, numbers)."""
    if isinstance(value, str):
        return value
    if name == "evidence":
        return format_evidence(value)
    if name == "candidates" and isinstance(value, Sequence):
        return format_candidates([str(v) for v in value])
    if name == "decision_units" and isinstance(value, Sequence):
        return format_units([str(v) for v in value])
    if name == "predicate_kinds" and isinstance(value, (Mapping, Sequence)):
        return predicate_kinds_text(value)
    return str(value)


def field_limit(name: str) -> int:
    """The truncation limit (characters) of one prompt field."""
    return FIELD_LIMITS.get(name, _SHORT_LIMIT)


def derive_field(name: str, fields: Mapping[str, Any]) -> str:
    """The rendered value of one string field: given or derived, converted, truncated."""
    value = fields.get(name)
    if value is None:
        value = _derive(name, fields)
    return truncate(to_text(name, value), field_limit(name))


def render_record(fields: Mapping[str, Any], show_condition: bool = True) -> str:
    """RECORD_RENDER (``show_condition=True``) or RECORD_RENDER_NO_CONDITION: the same record
    fields (situation, a_minus, a_plus, evidence, condition) in the same order; the only
    difference is the applicability clause. The result never exceeds the 1200-character limit."""

    def cut(key: str) -> str:
        return truncate(to_text(key, fields.get(key) or ""), RECORD_FIELD_LIMITS[key])

    lines = [f"Situation: {cut('situation')}"]
    if show_condition:
        lines.append(f"Applies only when: {cut('condition') or 'always (no condition)'}")
    lines.append(f"Original action (a-):\n{cut('a_minus')}")
    lines.append(f"Improved action (a+):\n{cut('a_plus')}")
    lines.append(f"Evidence: {cut('evidence')}")
    return "\n".join(lines)
