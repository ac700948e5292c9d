"""The prompt templates of the paper's Table 7, their rendering, and the inverse `parse_rendered`.

Every template is versioned; the version is part of every response-cache key, so changing a
template's text means bumping its version. Every string field is rendered inside an XML-like tag
named after the field (``<draft>…</draft>``, ``<task_id>…</task_id>``) and the system message
starts with the marker ``[cm_gym:<TEMPLATE> v<version>]``. That makes rendering invertible:
`parse_rendered(messages)` recovers the template name and the (truncated) string fields, which is
how the OpenAI-compatible server in `llm/server.py` serves any backend from plain chat messages.
Parsing is linear in the message length (literal pieces are found left to right with
``str.find``, no backtracking regex) and exact: the fields found must render back to the very
same messages, or the request is refused.

Fields are truncated to the SPEC §3 limits (`cm_gym.core.types.TRUNCATION`) before rendering. The
reply parsers live in `llm/parsers.py` and are re-exported here.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cm_gym.llm.base import (
    BEST_OF_N_JUDGE,
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    RECORD_RENDER,
    RECORD_RENDER_NO_CONDITION,
    REFLECT,
    REVISE_WITH_RECORD,
    REVISE_WITH_RECORDS,
)
from cm_gym.llm.errors import PromptError
from cm_gym.llm.fields import derive_field, render_record
from cm_gym.llm.parsers import (
    EDIT_GRAMMAR,
    apply_edit,
    format_alternatives,
    parse_alternatives,
    parse_distil,
    parse_judge,
)
from cm_gym.llm.prompts_mechanisms import MECHANISM_TEMPLATE_SPECS

logger = logging.getLogger(__name__)

__all__ = [
    "CHAT_TEMPLATES",
    "CONDITION_INSTRUCTION",
    "EDIT_GRAMMAR",
    "PromptTemplate",
    "RECORD_TEMPLATE_VERSIONS",
    "apply_edit",
    "format_alternatives",
    "parse_alternatives",
    "parse_distil",
    "parse_judge",
    "parse_rendered",
    "render",
    "render_messages",
    "render_record",
    "template_version",
]

#: The paper's DISTIL_RECORD condition instruction (Appendix D.8), verbatim.
CONDITION_INSTRUCTION = (
    "CONDITION: <a requirement of the NEW task that must hold before applying this. It must be "
    'checkable and it must be able to be FALSE for a task that looks similar. Write "none" only '
    "if no such requirement exists.>"
)

#: Versions of the two record renderings (they are not chat prompts; see `render_record`).
RECORD_TEMPLATE_VERSIONS: Mapping[str, str] = {RECORD_RENDER: "1", RECORD_RENDER_NO_CONDITION: "1"}

_MARKER = re.compile(r"\A\[cm_gym:(?P<name>[A-Z_]+) v(?P<version>[\w.]+)\]")
_FORMATTER = string.Formatter()


@dataclass(frozen=True)
class PromptTemplate:
    """One chat prompt: a system and a user text with ``{field}`` placeholders (each written
    inside its ``<field>`` tag) and a version that is part of every cache key."""

    name: str
    version: str
    system: str
    user: str

    @property
    def marker(self) -> str:
        return f"[cm_gym:{self.name} v{self.version}]"

    @cached_property
    def field_names(self) -> tuple[str, ...]:
        """The string fields this template renders, in order of first appearance."""
        seen: dict[str, None] = {}
        for text in (self.system, self.user):
            for _, name, _, _ in _FORMATTER.parse(text):
                if name:
                    seen.setdefault(name, None)
        return tuple(seen)

    @cached_property
    def pieces(self) -> tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, str | None], ...]]:
        """The system and user texts as ``(literal, field or None)`` pieces, in order."""
        return _pieces(self.marker + "\n" + self.system), _pieces(self.user)


def _pieces(text: str) -> tuple[tuple[str, str | None], ...]:
    return tuple((literal, name or None) for literal, name, _, _ in _FORMATTER.parse(text))


def _match(pieces: tuple[tuple[str, str | None], ...], text: str, fields: dict[str, str]) -> bool:
    """Split `text` along the template's literal pieces, left to right (each field ends where the
    next literal first occurs), filling `fields`; False when the text does not fit. Linear time:
    one ``str.find`` per piece, never any backtracking."""
    pos = 0
    pending: str | None = None  # a field whose end is the next literal
    for literal, name in pieces:
        if pending is None:
            if not text.startswith(literal, pos):
                return False
            pos += len(literal)
        else:
            end = text.find(literal, pos) if literal else len(text)
            if end < 0:
                return False
            value = text[pos:end]
            if fields.setdefault(pending, value) != value:
                return False  # the same field rendered twice with two values
            pos = end + len(literal)
            pending = None
        pending = name
    if pending is not None:
        value = text[pos:]
        if fields.setdefault(pending, value) != value:
            return False
        pos = len(text)
    return pos == len(text)


_META = "<task_id>{task_id}</task_id> <agent>{agent}</agent> <decision>{decision}</decision>"

_DRAFT = PromptTemplate(
    DRAFT_ACTION,
    "1",
    "You are an agent solving one task by submitting a single action, a "
    "<action_kind>{action_kind}</action_kind>. An executable checker evaluates every action you "
    "submit; earlier attempts on this task and the checker's feedback, if any, are in the state.",
    _META + " <failed_attempts>{failed_attempts}</failed_attempts>\n\n"
    "<state_text>\n{state_text}\n</state_text>\n\n"
    "Write the action for this decision. If an earlier attempt failed, use its feedback.\n"
    "<action_format>{action_format}</action_format>",
)

_REVISE = PromptTemplate(
    REVISE_WITH_RECORD,
    "1",
    "You are an agent revising a draft action (a <action_kind>{action_kind}</action_kind>) "
    "with one verified memory record from an earlier task. Revise only when the record's "
    "correction applies to this task; otherwise return the draft unchanged.",
    _META + "\n\n"
    "<state_text>\n{state_text}\n</state_text>\n\n"
    "Your draft, written before seeing memory:\n<draft>\n{draft}\n</draft>\n\n"
    "One memory record, <record_id>{record_id}</record_id>:\n<record>\n{record}\n</record>\n\n"
    "The record's verified change, from the original action a- to the improved action a+:\n"
    "<record_a_minus>\n{record_a_minus}\n</record_a_minus>\n"
    "<record_a_plus>\n{record_a_plus}\n</record_a_plus>\n\n"
    "If the same change fits your draft and the record applies to this task, make that change; "
    "otherwise keep the draft exactly as it is.\n<action_format>{action_format}</action_format>",
)

#: Beyond the paper: two records shown at once (the opt-in pair action space). The records are
#: numbered in the order the selector chose them; the reply is parsed like REVISE_WITH_RECORD's.
_REVISE_PAIR = PromptTemplate(
    REVISE_WITH_RECORDS,
    "1",
    "You are an agent revising a draft action (a <action_kind>{action_kind}</action_kind>) "
    "with two verified memory records from earlier tasks. Apply each record's correction only "
    "where it applies to this task; the two may fix different parts of the draft. If neither "
    "applies, return the draft unchanged.",
    _META + "\n\n"
    "<state_text>\n{state_text}\n</state_text>\n\n"
    "Your draft, written before seeing memory:\n<draft>\n{draft}\n</draft>\n\n"
    "Two memory records, <record_id>{record_id}</record_id>.\n"
    "Record 1:\n<record_1>\n{record_1}\n</record_1>\n"
    "Its verified change:\n<record_1_a_minus>\n{record_1_a_minus}\n</record_1_a_minus>\n"
    "<record_1_a_plus>\n{record_1_a_plus}\n</record_1_a_plus>\n\n"
    "Record 2:\n<record_2>\n{record_2}\n</record_2>\n"
    "Its verified change:\n<record_2_a_minus>\n{record_2_a_minus}\n</record_2_a_minus>\n"
    "<record_2_a_plus>\n{record_2_a_plus}\n</record_2_a_plus>\n\n"
    "Make each record's change where it fits your draft and the record applies to this task, "
    "first record 1, then record 2; keep every other part of the draft exactly as it is.\n"
    "<action_format>{action_format}</action_format>",
)

_ALTERNATIVES = PromptTemplate(
    GENERATE_LOCAL_ALTERNATIVES,
    "1",
    "You propose local edits of a failed action (a <action_kind>{action_kind}</action_kind>). Each "
    "edit changes exactly one decision unit. Never write a complete replacement submission.",
    "<task_id>{task_id}</task_id>\n\n"
    "<state_text>\n{state_text}\n</state_text>\n\n"
    "The failed action:\n<action>\n{action}\n</action>\n\n"
    "The checker's feedback on it:\n<feedback>\n{feedback}\n</feedback>\n\n"
    "Its decision units (each edit changes exactly one of them):\n"
    "<decision_units>\n{decision_units}\n</decision_units>\n\n"
    "Propose at most <k>{k}</k> different edits, each in this grammar and nothing else:\n"
    + EDIT_GRAMMAR.replace("{", "{{").replace("}", "}}"),
)

_DISTIL = PromptTemplate(
    DISTIL_RECORD,
    "1",
    "You distil a verified correction into a reusable memory record for future tasks. Actions are "
    "<action_kind>{action_kind}</action_kind>.",
    "On the task below, the original action a- was replaced by the improved action a+; both were "
    "checked from the same state.\n\n"
    "<task_id>{task_id}</task_id>\n\n"
    "<question>\n{question}\n</question>\n\n"
    "<context>\n{context}\n</context>\n\n"
    "<a_minus>\n{a_minus}\n</a_minus>\n\n"
    "<a_plus>\n{a_plus}\n</a_plus>\n\n"
    "<evidence>\n{evidence}\n</evidence>\n\n"
    'Conditions use this grammar: predicates joined by " AND "; each predicate is kind(arg, ...) '
    "with double-quoted string arguments or bare numbers. Available predicate kinds:\n"
    "<predicate_kinds>\n{predicate_kinds}\n</predicate_kinds>\n\n"
    "Reply with exactly two lines:\n"
    "SITUATION: <one sentence: the kind of decision in which this correction helps, without "
    "task-specific names>\n"
    + CONDITION_INSTRUCTION.replace("{", "{{").replace("}", "}}")
    + "\nWrite the CONDITION in the grammar above.",
)

_JUDGE = PromptTemplate(
    BEST_OF_N_JUDGE,
    "1",
    "You judge candidate actions (each a <action_kind>{action_kind}</action_kind>) without running "
    "them and pick the one most likely to be correct.",
    "<task_id>{task_id}</task_id>\n\n"
    "<state_text>\n{state_text}\n</state_text>\n\n"
    "<candidates>\n{candidates}\n</candidates>\n\n"
    "Choose exactly one of the <n>{n}</n> candidates and reply with one line: CHOICE: <number>",
)

_REFLECT = PromptTemplate(
    REFLECT,
    "1",
    "You are a Reflexion agent. After a failed attempt you write one sentence of reflection that "
    "will help your next attempt at the same task (a <action_kind>{action_kind}</action_kind>).",
    "<task_id>{task_id}</task_id>\n\n"
    "<question>\n{question}\n</question>\n\n"
    "Your last action:\n<last_action>\n{last_action}\n</last_action>\n\n"
    "The checker's feedback:\n<feedback>\n{feedback}\n</feedback>\n\n"
    "Reply with one sentence: what went wrong and what to do differently.",
)

#: The chat templates by name (the memory-mechanism baselines' are in `prompts_mechanisms.py`).
CHAT_TEMPLATES: Mapping[str, PromptTemplate] = {
    t.name: t
    for t in (
        _DRAFT,
        _REVISE,
        _REVISE_PAIR,
        _ALTERNATIVES,
        _DISTIL,
        _JUDGE,
        _REFLECT,
        *(PromptTemplate(*spec) for spec in MECHANISM_TEMPLATE_SPECS),
    )
}


def template_version(name: str) -> str:
    """The version string of a template (chat or record rendering); part of cache keys."""
    if name in CHAT_TEMPLATES:
        return CHAT_TEMPLATES[name].version
    if name in RECORD_TEMPLATE_VERSIONS:
        return RECORD_TEMPLATE_VERSIONS[name]
    raise PromptError(f"unknown template {name!r}; known: {', '.join(sorted(CHAT_TEMPLATES))}")


def _template(name: str) -> PromptTemplate:
    try:
        return CHAT_TEMPLATES[name]
    except KeyError:
        if name in RECORD_TEMPLATE_VERSIONS:
            raise PromptError(
                f"{name} is a record rendering, not a chat prompt: use render_record()"
            ) from None
        raise PromptError(f"unknown template {name!r}; known: {', '.join(sorted(CHAT_TEMPLATES))}") from None


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt: the chat messages and the truncated string fields they show."""

    template: str
    version: str
    messages: list[dict[str, str]]
    fields: dict[str, str]

    def joined(self) -> str:
        """All message contents joined, the text prompt tokens are counted on."""
        return "\n".join(m["content"] for m in self.messages)


def render(template: str, fields: Mapping[str, Any]) -> Rendered:
    """Render `template` from `fields` (strings, or the in-process `task` / `state` objects from
    which missing string fields are derived), truncating each field to its SPEC limit."""
    t = _template(template)
    values = {name: derive_field(name, fields) for name in t.field_names}
    system = t.marker + "\n" + t.system.format(**values)
    user = t.user.format(**values)
    return Rendered(
        t.name,
        t.version,
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        values,
    )


def render_messages(template: str, fields: Mapping[str, Any]) -> list[dict[str, str]]:
    """The chat messages ``[{"role": "system", ...}, {"role": "user", ...}]`` for `template`."""
    return render(template, fields).messages


def parse_rendered(messages: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, str]]:
    """Recover ``(template name, string fields)`` from chat messages rendered by `render`.

    Raises `PromptError` when the messages carry no cm_gym marker, name an unknown template or
    another version of it, or do not match the template's text.
    """
    if len(messages) != 2 or not all(isinstance(m, Mapping) for m in messages):
        raise PromptError("expected exactly two messages (system, user) rendered by a cm_gym template")
    contents = [m.get("content") for m in messages]
    if not all(isinstance(c, str) for c in contents):
        raise PromptError("message contents must be strings")
    system, user = contents  # type: ignore[misc]
    marker = _MARKER.match(system)  # type: ignore[arg-type]
    if marker is None:
        raise PromptError("the system message does not start with a [cm_gym:<TEMPLATE> v<version>] marker")
    t = _template(marker["name"])
    if marker["version"] != t.version:
        raise PromptError(
            f"template {t.name} v{marker['version']} was rendered by another cm_gym version "
            f"(this one has v{t.version})"
        )
    fields: dict[str, str] = {}
    for pieces, text in zip(t.pieces, (system, user), strict=True):
        if not _match(pieces, text, fields):  # type: ignore[arg-type]
            raise PromptError(f"the messages do not match template {t.name} v{t.version}")
    again = [m["content"] for m in render(t.name, fields).messages]
    if again != [system, user]:
        raise PromptError(
            f"the messages fit template {t.name} v{t.version} only ambiguously, or carry a field over "
            "its length limit: they were not rendered by cm_gym"
        )
    return t.name, fields
