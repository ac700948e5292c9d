"""Parsers of LLM replies (with the paper's fallbacks) and the fixed edit grammar.

Edit grammar (GENERATE_LOCAL_ALTERNATIVES), one block per candidate::

    EDIT 1
    REPLACE:
    <an exact fragment of the action, occurring exactly once in it>
    WITH:
    <the new fragment>

A reply without any ``EDIT`` block may instead give whole corrected versions, each in its own fenced
block (what the small-model prompts of `cm_gym.llm.prompts_small` ask for): each version is
reduced to the one token span it changes (`edit_fragment`) and kept only when that span is a
valid local edit under the same rule (unique, not the whole action).

Reasoning sections (``<think>…</think>``) are set aside before parsing. A parse failure never
raises: it is logged with the raw text and falls back (invalid edits are
skipped, a judge reply without a valid choice picks candidate 1, a missing condition is empty).
Every parser is linear in the reply's length (no regex that can backtrack over a run of the same
character; `tests/llm/test_fuzz.py` fuzzes them), so a hostile or broken reply costs no more than a
long one.
"""

from __future__ import annotations

import logging
import re

from cm_gym.domains.reply import fenced_blocks, visible_text

logger = logging.getLogger(__name__)

EDIT_GRAMMAR = "EDIT <n>\nREPLACE:\n<exact fragment of the action>\nWITH:\n<new fragment>"

_EDIT_HEADER = re.compile(r"^[ \t]*\**EDIT(?:[ \t]*#)?[ \t]*(\d+)\**(?:[ \t]*:)?[ \t]*$", re.M | re.I)
_REPLACE = re.compile(r"^[ \t]*REPLACE:[ \t]*", re.M | re.I)
_WITH = re.compile(r"^[ \t]*WITH:[ \t]*", re.M | re.I)
_TOKEN = re.compile(r"\w+|[^\w\s]+|\s+")
_NONE_WORDS = {"none", "n/a", "na", "null", "nothing", "no condition", "always"}
_FENCE_INFO = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-")
_LOGGED = 500  # characters of a raw reply quoted in a log line
MAX_EDIT_BLOCKS = 64  # a reply asked for K <= 4 edits; more blocks than this are not read


def _clean(fragment: str) -> str:
    """Strip surrounding whitespace and a wrapping code fence or backtick pair."""
    text = fragment.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        info, newline, rest = inner.partition("\n")
        if newline and set(info) <= _FENCE_INFO:
            inner = rest
        elif not newline and set(inner) <= _FENCE_INFO:
            inner = ""  # "```sql```": only an info string
        return inner.removesuffix("\n").strip()
    if len(text) > 2 and text.startswith("`") and text.endswith("`") and "`" not in text[1:-1]:
        text = text[1:-1].strip()
    return text


def _occurrences(text: str, fragment: str, stop: int = 2) -> int:
    """How many times `fragment` occurs in `text` (overlapping included), counting up to `stop`."""
    count, start = 0, text.find(fragment)
    while start != -1 and count < stop:
        count += 1
        start = text.find(fragment, start + 1)
    return count


def apply_edit(action: str, fragment: str, replacement: str) -> str | None:
    """Apply one edit: `fragment` must occur exactly once in `action`, must not be the whole
    (multi-token) action and must change something. Returns the edited action or None."""
    if not fragment or _occurrences(action, fragment) != 1 or fragment == replacement:
        return None
    if fragment == action.strip() and len(_TOKEN.findall(action.strip())) > 1:
        return None  # a complete replacement submission, not a local edit
    return action.replace(fragment, replacement, 1)


def parse_alternatives(text: str, action: str) -> list[str]:
    """The full edited actions described by a reply in the edit grammar, in reply order, without
    duplicates. Invalid candidates (no REPLACE/WITH, fragment absent or not unique, whole-action
    replacement, no change) are skipped and logged with the raw text. Reasoning sections
    (``<think>``) are set aside first."""
    text = visible_text(text)
    headers = list(_EDIT_HEADER.finditer(text))
    if len(headers) > MAX_EDIT_BLOCKS:
        logger.warning(
            "GENERATE_LOCAL_ALTERNATIVES reply has %d EDIT blocks; reading the first %d",
            len(headers),
            MAX_EDIT_BLOCKS,
        )
        headers = headers[: MAX_EDIT_BLOCKS + 1]
    if not headers:
        if not text.strip():
            logger.debug("GENERATE_LOCAL_ALTERNATIVES reply is empty: no edits")
            return []
        versions = _fenced_versions(text, action)
        if versions is not None:
            return versions
        logger.warning(
            "GENERATE_LOCAL_ALTERNATIVES reply has no 'EDIT <n>' block; raw reply: %r", text[:_LOGGED]
        )
        return []
    out: list[str] = []
    for i, header in enumerate(headers[:MAX_EDIT_BLOCKS]):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        block = text[header.end() : end]
        rep, wit = _REPLACE.search(block), _WITH.search(block)
        if rep is None or wit is None or wit.start() < rep.end():
            logger.warning(
                "EDIT %s lacks REPLACE:/WITH:; skipped. Raw block: %r", header.group(1), block[:_LOGGED]
            )
            continue
        fragment = _clean(block[rep.end() : wit.start()])
        replacement = _clean(block[wit.end() :])
        edited = apply_edit(action, fragment, replacement)
        if edited is None:
            logger.warning(
                "EDIT %s is not a valid local edit (fragment %r occurs %d times in the action, or "
                "replaces all of it, or changes nothing); skipped",
                header.group(1),
                fragment[:_LOGGED],
                _occurrences(action, fragment) if fragment else 0,
            )
            continue
        if edited != action and edited not in out:
            out.append(edited)
    return out


#: A line that opens one of several versions inside one block ("-- Version 2: ...", "# version 3",
#: "/* Version 1 */"): small models put all K versions in one fence, each under such a line.
_VERSION_LINE = re.compile(r"^[ \t]*(?:--|#|//|/\*)[ \t]*(?:corrected[ \t]+)?version[ \t]*\d+\b.*$", re.I)


def _split_versions(body: str) -> list[str]:
    """The versions in one fenced block: split at version header lines (dropped), else the block."""
    parts: list[list[str]] = [[]]
    for line in body.splitlines():
        if len(line) <= 200 and _VERSION_LINE.match(line):
            parts.append([])
        else:
            parts[-1].append(line)
    return [text for part in parts if (text := "\n".join(part).strip())]


def _fenced_versions(text: str, action: str) -> list[str] | None:
    """The corrected versions in a reply's fenced blocks (one per block, or several in one block
    under version header lines) that are one local edit of `action`, in reply order, without
    duplicates; None when the reply has no fenced block at all. A trailing semicolon the action
    does not have is dropped first (it changes nothing the checker sees)."""
    blocks = fenced_blocks(text)
    if not blocks:
        return None
    out: list[str] = []
    original = action.strip()
    versions = [v for block in blocks[:MAX_EDIT_BLOCKS] for v in _split_versions(block.body)]
    for version in versions[:MAX_EDIT_BLOCKS]:
        if not original.endswith(";"):
            version = version.rstrip().rstrip(";").rstrip()
        if not version or version == original:
            continue
        pair = edit_fragment(original, version)
        if pair is None:
            logger.info(
                "a fenced version is not one local edit of the action; skipped: %r", version[:_LOGGED]
            )
            continue
        edited = apply_edit(action, *pair)
        if edited is not None and edited != action and edited not in out:
            out.append(edited)
    return out


def edit_fragment(action: str, edited: str) -> tuple[str, str] | None:
    """The smallest token-aligned (fragment, replacement) that turns `action` into `edited` under
    `apply_edit` (fragment unique, surrounding whitespace stripped), or None."""
    if action == edited:
        return None
    p = 0
    limit = min(len(action), len(edited))
    while p < limit and action[p] == edited[p]:
        p += 1
    s = 0
    while s < limit - p and action[-1 - s] == edited[-1 - s]:
        s += 1
    spans = [m.span() for m in _TOKEN.finditer(action)]
    if not spans:
        return None
    # token indices covering the changed region [p, len(action) - s)
    end_char = len(action) - s
    lo = next((i for i, (a, b) in enumerate(spans) if b > p), len(spans) - 1)
    hi = next((i for i in range(len(spans) - 1, -1, -1) if spans[i][0] < end_char), lo)
    hi = max(hi, lo)
    grow_left = True
    while True:
        start, stop = spans[lo][0], spans[hi][1]
        fragment = action[start:stop]
        replacement = edited[start : len(edited) - (len(action) - stop)]
        frag, rep = fragment.strip(), replacement.strip()
        if apply_edit(action, frag, rep) == edited:
            return frag, rep
        if lo == 0 and hi == len(spans) - 1:
            return None
        if (grow_left and lo > 0) or hi == len(spans) - 1:
            lo -= 1
        else:
            hi += 1
        grow_left = not grow_left


def format_alternatives(action: str, edited_actions: list[str]) -> str:
    """A reply in the edit grammar describing each edited action as one REPLACE/WITH edit of
    `action`. Edits that cannot be expressed as a unique local fragment are left out (logged)."""
    blocks: list[str] = []
    for edited in edited_actions:
        pair = edit_fragment(action, edited)
        if pair is None:
            logger.debug("edited action cannot be written as one local edit; left out: %r", edited)
            continue
        blocks.append(f"EDIT {len(blocks) + 1}\nREPLACE:\n{pair[0]}\nWITH:\n{pair[1]}")
    return "\n\n".join(blocks)


#: Predicates listed with commas instead of " AND " (what small models write): a comma right after
#: a predicate's closing parenthesis and before the next predicate's name (arguments never hold
#: a parenthesis outside quotes in the grammar, so this comma is between predicates).
_LISTED = re.compile(r"\)[ \t]*,[ \t]*(?=[A-Za-z_]\w{0,63}\()")


def _normalise_condition(condition: str) -> str:
    text = " ".join(condition.split()).strip().strip("`").strip()
    if text.strip("\"'. ").lower() in _NONE_WORDS:
        return ""
    return _LISTED.sub(") AND ", text)


def _section(text: str, label: str, until: str) -> str | None:
    """The text after the first ``label:`` up to the next ``until:`` (or the end), or None."""
    start = re.search(re.escape(label) + ":", text, flags=re.I)
    if start is None:
        return None
    stop = re.search(re.escape(until) + ":", text[start.end() :], flags=re.I)
    return text[start.end() : start.end() + stop.start()] if stop else text[start.end() :]


def parse_distil(text: str) -> tuple[str, str]:
    """``(situation, condition_text)`` from a DISTIL_RECORD reply. "none" maps to "" (always
    applicable). A missing SITUATION or CONDITION line is logged and read as ""."""
    text = visible_text(text)
    situation_t = _section(text, "SITUATION", "CONDITION")
    condition_t = _section(text, "CONDITION", "SITUATION")
    if situation_t is None or condition_t is None:
        logger.warning("DISTIL_RECORD reply lacks SITUATION: or CONDITION:; raw reply: %r", text[:_LOGGED])
    situation = " ".join(situation_t.split()) if situation_t is not None else ""
    condition = _normalise_condition(condition_t) if condition_t is not None else ""
    return situation, condition


def parse_judge(text: str, n: int) -> int:
    """The 1-based candidate from ``CHOICE: <n>``; on a missing or out-of-range choice, log the raw
    reply and fall back to candidate 1 (paper Table 7)."""
    text = visible_text(text)
    m = re.search(r"CHOICE:\s*(?:\[\s*)?(\d{1,9})", text, flags=re.I)
    if m is not None and 1 <= int(m.group(1)) <= n:
        return int(m.group(1))
    logger.warning(
        "BEST_OF_N_JUDGE reply has no valid CHOICE in 1..%d; falling back to 1. Raw reply: %r",
        n,
        text[:_LOGGED],
    )
    return 1
