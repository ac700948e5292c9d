"""A SQL query inside a reply's prose: where a ``SELECT`` / ``WITH`` statement starts and ends.

The recogniser of the SQL domain's `ReplyFormat` (`cm_gym.domains.reply`). A statement starts at
the word ``SELECT`` or ``WITH`` (in lower case only where a statement can start: the reply's
start, a line start, after a colon or an opening backtick); it ends at a ``;``, a blank line, a fence, the closing backtick
of inline code, a sentence that starts after ``". "``, or a line that reads as prose — never
inside a string literal, a quoted identifier or parentheses. The first candidate sqlglot parses is
the query; when none parses, the first candidate that starts like a query (upper-case keyword at
a line start) is returned, so the world model says what is wrong with it. One pass per candidate,
at most `MAX_CANDIDATES` candidates: linear in the reply.
"""

from __future__ import annotations

import re

from cm_gym.domains.reply import prose_line, starts_sentence

MAX_CANDIDATES = 16
MAX_CHARS = 20_000  # a candidate longer than this is not handed to sqlglot
#: words that continue a query at the start of a line (anything else capitalised reads as prose)
_KEYWORDS = frozenset(
    [
        "select",
        "from",
        "where",
        "group",
        "order",
        "by",
        "having",
        "limit",
        "offset",
        "join",
        "left",
        "right",
        "inner",
        "outer",
        "cross",
        "natural",
        "full",
        "on",
        "using",
        "and",
        "or",
        "not",
        "in",
        "is",
        "null",
        "like",
        "glob",
        "between",
        "exists",
        "union",
        "intersect",
        "except",
        "all",
        "distinct",
        "as",
        "case",
        "when",
        "then",
        "else",
        "end",
        "asc",
        "desc",
        "with",
        "recursive",
        "values",
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "cast",
        "collate",
        "escape",
        "over",
        "partition",
        "window",
        "filter",
        "lower",
        "upper",
        "length",
        "substr",
        "abs",
        "round",
        "coalesce",
        "ifnull",
        "iif",
        "nullif",
        "replace",
        "instr",
        "trim",
        "strftime",
        "date",
        "datetime",
        "julianday",
        "total",
        "group_concat",
        "true",
        "false",
    ]
)
_START = re.compile(r"\b(?:select|with)\b", re.IGNORECASE)
_SPECIAL = re.compile(r"[`'\"\[();.\n]")  # the characters the statement scan stops at


def _starts(text: str) -> list[tuple[int, bool]]:
    """Candidate starts (position, strong) in order: ``SELECT``/``WITH`` as a whole word, and
    lower-case ``select``/``with`` where a statement may begin (a line's start, after a colon or
    a backtick); strong = upper-case keyword at the reply's or a line's start."""
    out: list[tuple[int, bool]] = []
    for found in _START.finditer(text):
        at, end = found.span()
        window = max(0, at - 200)  # bounded look-back: linear however long the line
        newline = text.rfind("\n", window, at)
        lead = text[newline + 1 if newline != -1 else window : at].strip()
        upper = found.group().isupper()
        if upper or lead in ("", "`", ">", "-", "*") or lead.endswith((":", "`", "(")):
            out.append((at, upper and lead in ("", ">")))
            if len(out) >= MAX_CANDIDATES:
                break
    return out


def statement_end(text: str, start: int) -> int:
    """Where the statement starting at `start` ends (exclusive); see the module docstring. Jumps
    from one special character to the next (strings and quoted names skipped whole)."""
    inline = start > 0 and text[start - 1] == "`"
    depth, n = 0, len(text)
    i = start
    while True:
        found = _SPECIAL.search(text, i)
        if found is None:
            return n
        i = found.start()
        ch = text[i]
        if ch == "`" and (inline or text.startswith("```", i)):
            return i
        if ch in "`'\"[":
            i = _after_quoted(text, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif (
            depth == 0
            and ch == ";"
            or depth == 0
            and ch == "."
            and text.startswith(" ", i + 1)
            and starts_sentence(text, i + 2, _KEYWORDS)
        ):
            return i
        elif ch == "\n" and depth == 0:
            nxt = text.find("\n", i + 1)
            line = text[i + 1 : n if nxt == -1 else nxt]
            if not line.strip() or prose_line(line, _KEYWORDS):
                return i
        i += 1


def _after_quoted(text: str, i: int) -> int:
    """The index after the string literal or quoted name opening at `i` (doubled quotes escape;
    an unterminated one runs to the end)."""
    close = "]" if text[i] == "[" else text[i]
    j = text.find(close, i + 1)
    while j != -1 and close != "]" and text.startswith(close, j + 1):
        j = text.find(close, j + 2)
    return len(text) if j == -1 else j + 1


def _parses(sql: str) -> bool:
    """Whether sqlglot parses `sql` (through the persistent work memo: a pure function of it)."""
    from cm_gym.domains.sql import sqlast, workmemo

    if len(sql) > MAX_CHARS:
        return False
    return workmemo.sql_work().cached(
        workmemo.memo_key("parses", sql), lambda: sqlast.parses(sql), _flag, _unflag
    )


def _flag(value: bool) -> bytes:
    return b"1" if value else b"0"


def _unflag(data: bytes | str) -> bool:
    if data not in (b"1", b"0"):
        raise ValueError("not a flag")
    return data == b"1"


def find_query(text: str) -> str | None:
    """The SQL query stated in `text`, or None (see the module docstring)."""
    fallback: str | None = None
    for start, strong in _starts(text):
        candidate = text[start : statement_end(text, start)].strip().rstrip(".,:").strip()
        if not candidate:
            continue
        if _parses(candidate):
            return candidate
        if strong and fallback is None:
            fallback = candidate
    return fallback
