"""Parsers of the memory-mechanism templates' replies, with their documented fallbacks, and the
BEFORE/AFTER worked examples guidance may carry.

Like `llm/parsers.py`, a parse never raises: reasoning sections (``<think>``) are set aside,
labels may carry Markdown (``**TITLE:**``, ``## TITLE:``), and a malformed reply is logged with
its raw text and falls back (an insight or reflection becomes the whole reply, an importance
rating becomes 5, a skill or strategy keeps whatever fields were found and fills the others from
the reply's first line, a MemGPT search without ``SEARCH:`` searches for the task question).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from cm_gym.domains.reply import visible_text

logger = logging.getLogger(__name__)

_EXAMPLE = re.compile(
    r"BEFORE:\s*```[\w+-]*\n(?P<old>.*?)\n?```\s*AFTER:\s*```[\w+-]*\n(?P<new>.*?)\n?```", re.S
)
_SHORT = 600


def example_block(before: str, after: str) -> str:
    """A worked example: the action before and after a change, as fenced blocks."""
    return f"BEFORE:\n```\n{before}\n```\nAFTER:\n```\n{after}\n```"


def _label_at(line: str, names: tuple[str, ...]) -> tuple[str, str] | None:
    """``(NAME, rest of the line)`` when `line` starts a labelled field: ``NAME:`` in any case,
    Markdown decorations allowed around the label (``**NAME:**``, ``## NAME:``, ``- NAME:``)."""
    s = line.lstrip(" \t#>-*_")
    upper = s[:40].upper()
    for name in names:
        if upper.startswith(name):
            rest = s[len(name) :].lstrip(" \t*_")
            if rest.startswith(":"):
                return name, rest[1:].lstrip("*_ \t")
    return None


def _fields(text: str, names: tuple[str, ...]) -> dict[str, str]:
    """The first value of each labelled field of a reply (reasoning sections set aside): the text
    after ``NAME:`` up to the next line labelled with *another* name (newlines kept, so worked
    examples inside survive). One pass over the lines."""
    out: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    for line in visible_text(text).split("\n"):
        label = _label_at(line, names)
        if label is None or label[0] == current:  # the same label again is part of the value
            if current is not None:
                lines.append(line)
            continue
        if current is not None:
            out[current] = "\n".join(lines).strip()
        # a field given twice keeps its first value; the lines of the second are skipped
        current, lines = (None, []) if label[0] in out else (label[0], [label[1]])
    if current is not None:
        out[current] = "\n".join(lines).strip()
    return out


def _field(text: str, name: str, names: tuple[str, ...]) -> str | None:
    """The text after ``NAME:`` up to the next line starting with another of `names`, or None."""
    value = _fields(text, names).get(name)
    return value or None


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:_SHORT]


def parse_labelled(text: str, label: str, template: str) -> str:
    """The text after ``LABEL:`` (to the end of the reply); falls back to the whole reply
    without its reasoning sections."""
    value = _field(text, label, (label,))
    if value:
        return value
    whole = visible_text(text)
    logger.warning(
        "%s reply has no %s: line; using the whole reply. Raw reply: %r", template, label, text[:300]
    )
    return whole


def parse_importance(text: str) -> int:
    """``IMPORTANCE: n`` clipped to 1..10; the first integer of the reply; else 5 (logged)."""
    text = visible_text(text)
    m = re.search(r"IMPORTANCE\W{0,8}:\W{0,8}(\d+)", text, flags=re.I) or re.search(r"\b(\d+)\b", text)
    if m is None:
        logger.warning("GENERATIVE_AGENTS_IMPORTANCE reply has no number; using 5. Raw reply: %r", text[:200])
        return 5
    return min(10, max(1, int(m.group(1))))


@dataclass(frozen=True)
class Skill:
    """A Voyager skill: name, applicability description, steps."""

    name: str
    description: str
    steps: str


def parse_skill(text: str) -> Skill:
    """NAME / DESCRIPTION / STEPS; missing fields fall back to the first line (logged)."""
    names = ("NAME", "DESCRIPTION", "STEPS")
    got = {n: _field(text, n, names) for n in names}
    if not all(got.values()):
        logger.warning(
            "VOYAGER_SKILL reply lacks %s; filled from the reply", [n for n, v in got.items() if not v]
        )
    first = _first_line(text)
    return Skill(
        got["NAME"] or first[:60] or "skill",
        got["DESCRIPTION"] or first,
        got["STEPS"] or text.strip(),
    )


@dataclass(frozen=True)
class Strategy:
    """A ReasoningBank memory item: title, description, content, and the judged outcome."""

    title: str
    description: str
    content: str
    success: bool | None = None


def parse_strategy(text: str) -> Strategy:
    """OUTCOME (optional) / TITLE / DESCRIPTION / CONTENT; missing fields fall back to the reply
    (logged). An OUTCOME other than success/failure is read as unknown (None)."""
    names = ("OUTCOME", "TITLE", "DESCRIPTION", "CONTENT")
    got = {n: _field(text, n, names) for n in names}
    missing = [n for n in names[1:] if not got[n]]
    if missing:
        logger.warning("strategy reply lacks %s; filled from the reply. Raw reply: %r", missing, text[:300])
    outcome = (got["OUTCOME"] or "").lower()
    success = True if outcome.startswith("success") else False if outcome.startswith("fail") else None
    first = _first_line(text)
    return Strategy(
        got["TITLE"] or first[:80] or "strategy",
        got["DESCRIPTION"] or first,
        got["CONTENT"] or text.strip(),
        success,
    )


def parse_search(text: str, default_query: str) -> str | None:
    """The MemGPT archival search query; ``none`` means keep the context (None). A reply without
    ``SEARCH:`` searches for `default_query` (logged)."""
    m = re.search(r"SEARCH\W{0,8}:[*_ \t]*(.*)", visible_text(text), flags=re.I)
    if m is None:
        logger.warning("MEMGPT_SEARCH reply has no SEARCH: line; searching the question. Raw: %r", text[:200])
        return default_query
    query = " ".join(m.group(1).split()).strip("\"'` ")
    return None if query.lower() in ("", "none", "no", "n/a") else query


# -- trajectories as prompt text (rendered by the mechanisms, read back by the simulated LLM) -----
_ATTEMPT = re.compile(
    r"Attempt (?P<n>\d+):\n```\n(?P<action>.*?)\n```\nFeedback: (?P<feedback>[^\n]*)\n"
    r"Result: (?P<result>solved|not solved)(?:; checked score (?P<score>[0-9.]+))?",
    re.S,
)


@dataclass(frozen=True)
class AttemptText:
    """One attempt as shown in a trajectory prompt: the action, the environment's feedback, whether
    it solved the task and (verified variants only) the checker's score."""

    action: str
    feedback: str
    solved: bool
    score: float | None = None


def render_attempts(attempts: list[AttemptText], limit: int = 3000, *, scores: bool = False) -> str:
    """Attempts as ``Attempt n:`` blocks (action, feedback, result[, checked score]), keeping the
    most recent ones when the whole does not fit `limit` characters (earlier ones are omitted,
    and the omission is stated)."""
    blocks: list[str] = []
    for i, a in enumerate(attempts, start=1):
        result = "solved" if a.solved else "not solved"
        if scores and a.score is not None:
            result += f"; checked score {a.score:.2f}"
        feedback = " ".join(a.feedback.split())[:300]
        blocks.append(f"Attempt {i}:\n```\n{a.action}\n```\nFeedback: {feedback}\nResult: {result}")
    kept: list[str] = []
    used = 0
    for block in reversed(blocks):
        if kept and used + len(block) + 2 > limit - 60:
            break
        kept.insert(0, block)
        used += len(block) + 2
    omitted = len(blocks) - len(kept)
    head = [f"({omitted} earlier attempt(s) omitted)"] if omitted else []
    return "\n\n".join(head + kept)


def parse_attempts(text: str) -> list[AttemptText]:
    """The attempts of a trajectory rendered by `render_attempts` (unparseable blocks are skipped)."""
    return [
        AttemptText(
            m["action"], m["feedback"], m["result"] == "solved", float(m["score"]) if m["score"] else None
        )
        for m in _ATTEMPT.finditer(text)
    ]


def correction(attempts: list[AttemptText], *, by_score: bool = False) -> tuple[str, str] | None:
    """The last failed action before the first solving one; with `by_score`, the consecutive pair
    with the largest checked-score gain (> 0) instead, so partial improvements count."""
    if by_score:
        best, pair = 0.0, None
        for prev, cur in zip(attempts, attempts[1:], strict=False):
            gain = (cur.score or 0.0) - (prev.score or 0.0)
            if gain > best and prev.action != cur.action:
                best, pair = gain, (prev.action, cur.action)
        if pair is not None:
            return pair
    for i, a in enumerate(attempts):
        if a.solved:
            failed = [b for b in attempts[:i] if not b.solved and b.action != a.action]
            return (failed[-1].action, a.action) if failed else None
    return None


def stated_contrasts(text: str) -> list[tuple[str, str]]:
    """The changes `text` shows, in order of appearance, as (before, after) pairs: its BEFORE/AFTER
    worked examples, and the correction of each rendered trajectory in it (a failed attempt
    followed by a solving one; attempt numbering restarting at 1 starts a new trajectory)."""
    found: list[tuple[int, str, str]] = []
    for m in _EXAMPLE.finditer(text):
        found.append((m.start(), m["old"].strip(), m["new"].strip()))
    runs: list[list[re.Match[str]]] = []
    for m in _ATTEMPT.finditer(text):
        if not runs or int(m["n"]) <= int(runs[-1][-1]["n"]):
            runs.append([])
        runs[-1].append(m)
    for run in runs:
        attempts = [AttemptText(m["action"], m["feedback"], m["result"] == "solved") for m in run]
        fix = correction(attempts)
        if fix is not None:
            found.append((run[0].start(), fix[0].strip(), fix[1].strip()))
    return [(old, new) for _, old, new in sorted(found) if old and old != new]
