"""Prompts a 0.5–1.5B coder model can follow, laid out for prefix reuse.

The paper's Table 7 templates (`cm_gym.llm.prompts`) are what cm_gym's response cache keys on and
what every other backend sees; the local model (`cm_gym.llm.local_llm`) answers the same calls
from the same string fields with these variants instead. Two reasons, both measured on the real
model (docs/local-model.md has the parse and validity rates they were chosen by):

* **Layout for prefix reuse.** llama.cpp re-evaluates a prompt only from its first token that
  differs from the previous one. Table 7 puts the task id and the question before the database
  schema, so calls on the same database shared nothing beyond the system message. Here every
  prompt is instructions (fixed per template and domain) → environment context (the schema or
  the program under repair: shared by the tasks of one environment) → the task's own part
  (question, attempts, draft, record) last.
* **Formats a small model writes.** Instead of the paper's ``EDIT n / REPLACE: / WITH:`` grammar,
  GENERATE_LOCAL_ALTERNATIVES asks for K corrected versions, each in its own fenced block; each
  version is reduced to the one span it changes (`cm_gym.llm.parsers.parse_alternatives` reads
  both forms, and refuses a version that rewrites the whole action). The action itself always
  comes last, in one fenced block, as the domain's action format asks.

Every variant is a pure function of the string fields Table 7 renders (what the cache key holds),
so replaying a cache needs no model and serving plain chat messages (`cm-gym serve-llm`) gives the
same prompts. `PROMPTS_VERSION` is part of the local backend's cache identity: changing any text
here must bump it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from cm_gym.llm.base import (
    BEST_OF_N_JUDGE,
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    REVISE_WITH_RECORD,
    REVISE_WITH_RECORDS,
)
from cm_gym.llm.fields import derive_field
from cm_gym.llm.prompts import render

PROMPTS_VERSION = "1"

Messages = list[dict[str, str]]

_SYSTEM = "You are an expert programmer. You answer with code only, no explanation."


def _f(fields: Mapping[str, Any], name: str) -> str:
    try:
        return derive_field(name, fields)
    except Exception:  # noqa: BLE001 - a field this call does not carry renders empty
        return ""


_HISTORY_MARKERS = ("Previous attempt:\n", "Reflections:\n")


def split_state(state_text: str, question: str = "") -> tuple[str, str, str]:
    """``(question, history, environment)`` of a rendered state (`AgentState.render`): the task,
    the previous attempt / feedback / reflections, and the environment context. A multi-line
    question is recognised by the `question` field when given, else the history starts at the
    first line that opens it."""
    head, _, environment = state_text.partition("\nEnvironment:\n")
    body = head.removeprefix("Task: ")
    if question and body.startswith(question.strip()):
        asked, history = body[: len(question.strip())], body[len(question.strip()) :]
    else:
        cut = min((i for m in _HISTORY_MARKERS if (i := body.find("\n" + m)) >= 0), default=len(body))
        asked, history = body[:cut], body[cut:]
    return asked.strip(), history.strip(), environment.strip()


def _context(fields: Mapping[str, Any]) -> tuple[str, str, str]:
    given = _f(fields, "question")
    question, history, environment = split_state(_f(fields, "state_text"), given)
    context = _f(fields, "context") or environment
    return (given or question), history, context


def _fence(text: str) -> str:
    return f"```\n{text.strip()}\n```"


def _env_block(context: str) -> str:
    return f"### Environment\n{context}\n\n" if context else ""


def _draft(fields: Mapping[str, Any]) -> Messages:
    question, history, context = _context(fields)
    kind, fmt = _f(fields, "action_kind"), _f(fields, "action_format")
    history_block = ""
    if history:
        history_block = f"### Your earlier attempt failed\n{history}\nFix it.\n\n"
    return [
        {"role": "system", "content": f"{_SYSTEM} You write one {kind}."},
        {
            "role": "user",
            "content": f"{_env_block(context)}{history_block}### Task\n{question}\n\n{fmt}",
        },
    ]


def _record_block(prefix: str, fields: Mapping[str, Any]) -> str:
    minus, plus = _f(fields, f"{prefix}a_minus"), _f(fields, f"{prefix}a_plus")
    record = _f(fields, prefix.rstrip("_") if prefix else "record")
    situation = next(
        (ln[len("Situation: ") :] for ln in record.splitlines() if ln.startswith("Situation: ")), ""
    )
    applies = next(
        (
            ln[len("Applies only when: ") :]
            for ln in record.splitlines()
            if ln.startswith("Applies only when: ")
        ),
        "",
    )
    lines = [
        f"On an earlier task, this wrong version:\n{_fence(minus)}\nwas verified to be fixed as:\n{_fence(plus)}"
    ]
    if situation:
        lines.append(f"Lesson: {situation}")
    if applies:
        lines.append(f"It applies only when: {applies}")
    return "\n".join(lines)


def _revise(fields: Mapping[str, Any]) -> Messages:
    question, _, context = _context(fields)
    kind, fmt = _f(fields, "action_kind"), _f(fields, "action_format")
    return [
        {"role": "system", "content": f"{_SYSTEM} You revise one {kind} using a verified correction."},
        {
            "role": "user",
            "content": (
                f"{_env_block(context)}### Task\n{question}\n\n### Your draft\n{_fence(_f(fields, 'draft'))}\n\n"
                f"### A verified correction\n{_record_block('record_', fields)}\n\n"
                "If your draft makes the same mistake, make the same change in it. If the correction "
                "does not apply to this task, return your draft unchanged.\n"
                f"{fmt}"
            ),
        },
    ]


def _revise_pair(fields: Mapping[str, Any]) -> Messages:
    question, _, context = _context(fields)
    kind, fmt = _f(fields, "action_kind"), _f(fields, "action_format")
    blocks = "\n\n".join(
        f"### Verified correction {i}\n{_record_block(f'record_{i}_', fields)}" for i in (1, 2)
    )
    return [
        {"role": "system", "content": f"{_SYSTEM} You revise one {kind} using verified corrections."},
        {
            "role": "user",
            "content": (
                f"{_env_block(context)}### Task\n{question}\n\n### Your draft\n{_fence(_f(fields, 'draft'))}\n\n"
                f"{blocks}\n\nMake each correction that applies to your draft; keep everything else. "
                f"If none applies, return your draft unchanged.\n{fmt}"
            ),
        },
    ]


def _alternatives(fields: Mapping[str, Any]) -> Messages:
    question, _, context = _context(fields)
    kind, k = _f(fields, "action_kind"), _f(fields, "k") or "4"
    return [
        {"role": "system", "content": f"{_SYSTEM} You fix a failed {kind} with small changes."},
        {
            "role": "user",
            "content": (
                f"{_env_block(context)}### Task\n{question}\n\n### Failed {kind}\n{_fence(_f(fields, 'action'))}\n\n"
                f"### Checker feedback\n{_f(fields, 'feedback')}\n\n"
                f"Write {k} different corrected versions. Each version changes one small part "
                "(one clause, condition, column, value or expression) and keeps the rest. "
                "Write each version in its own fenced code block, nothing else."
            ),
        },
    ]


def _distil(fields: Mapping[str, Any]) -> Messages:
    kinds = _f(fields, "predicate_kinds")
    return [
        {"role": "system", "content": "You turn a verified correction into a short reusable lesson."},
        {
            "role": "user",
            "content": (
                f"### Condition predicates\n{kinds}\n\n"
                f"### Task\n{_f(fields, 'question')}\n\n### Wrong\n{_fence(_f(fields, 'a_minus'))}\n\n"
                f"### Verified fix\n{_fence(_f(fields, 'a_plus'))}\n\n### Evidence\n{_f(fields, 'evidence')}\n\n"
                "Reply with exactly two lines:\n"
                "SITUATION: <one sentence: when this fix helps, without task-specific names>\n"
                'CONDITION: <predicates from the list above joined by " AND ", with double-quoted '
                'string arguments, that must hold for a new task; or "none">'
            ),
        },
    ]


def _reflect(fields: Mapping[str, Any]) -> Messages:
    return [
        {"role": "system", "content": "You help a programmer learn from a failed attempt."},
        {
            "role": "user",
            "content": (
                f"### Task\n{_f(fields, 'question')}\n\n### Last attempt\n{_fence(_f(fields, 'last_action'))}\n\n"
                f"### Checker feedback\n{_f(fields, 'feedback')}\n\n"
                "In one sentence: what went wrong and what to do differently next time?"
            ),
        },
    ]


def _judge(fields: Mapping[str, Any]) -> Messages:
    question, _, context = _context(fields)
    return [
        {"role": "system", "content": "You pick the candidate most likely to be correct."},
        {
            "role": "user",
            "content": (
                f"{_env_block(context)}### Task\n{question}\n\n### Candidates\n{_f(fields, 'candidates')}\n\n"
                f"Choose one of the {_f(fields, 'n')} candidates. Reply with one line: CHOICE: <number>"
            ),
        },
    ]


BUILDERS: Mapping[str, Callable[[Mapping[str, Any]], Messages]] = {
    DRAFT_ACTION: _draft,
    REVISE_WITH_RECORD: _revise,
    REVISE_WITH_RECORDS: _revise_pair,
    GENERATE_LOCAL_ALTERNATIVES: _alternatives,
    DISTIL_RECORD: _distil,
    REFLECT: _reflect,
    BEST_OF_N_JUDGE: _judge,
}


def render_small(template: str, fields: Mapping[str, Any]) -> Messages:
    """The local model's chat messages for a cm_gym call: the variant above, or Table 7's text
    for templates without one (the memory mechanisms' baselines)."""
    builder = BUILDERS.get(template)
    if builder is None:
        return render(template, fields).messages
    return builder(fields)


_SAMPLE: Mapping[str, str] = {
    name: f"<{name}>"
    for name in (
        "state_text", "context", "question", "action_kind", "action_format", "draft", "record",
        "record_a_minus", "record_a_plus", "record_1", "record_1_a_minus", "record_1_a_plus",
        "record_2", "record_2_a_minus", "record_2_a_plus", "action", "feedback", "k",
        "predicate_kinds", "a_minus", "a_plus", "evidence", "last_action", "candidates", "n",
    )
}  # fmt: skip


#: A second sample: a multi-line question, an earlier attempt and a record with its lesson, so the
#: digest also sees how a state is split and a record is shown.
_SAMPLE_STATE: Mapping[str, str] = {
    **_SAMPLE,
    "question": "<q1>\n<q2>",
    "state_text": "Task: <q1>\n<q2>\nPrevious attempt:\n<a>\nFeedback: <f>\nEnvironment:\n<env>",
    "context": "",
    "record": "Situation: <s>\nApplies only when: <c>\nOriginal action (a-):\n<m>",
}


def prompts_digest() -> str:
    """A digest of every variant's text, rendered on placeholder fields: replies depend on it, so
    it is part of the local backend's cache identity (any change of wording or layout changes it)."""
    h = hashlib.sha256(PROMPTS_VERSION.encode())
    for name in sorted(BUILDERS):
        h.update(name.encode())
        for sample in (_SAMPLE, _SAMPLE_STATE):
            for message in BUILDERS[name](sample):
                h.update(f"{message['role']}\0{message['content']}\0".encode())
    return h.hexdigest()[:12]
