"""Linear-time vetting of a submitted SQL statement: a tokenizer, not backtracking regexes.

`vet(sql)` reads the text once with SQLite's own lexical rules (``--`` comments to the end of
the line; ``/* */`` comments, not nested, an unterminated one running to the end; ``'...'``
strings and ``"..."`` / ```...``` / ``[...]`` identifiers with doubled-quote escapes; ``X'..'``
blobs; numbers; parameters; operators) and decides:

- the statement kind: the first significant token must be SELECT, WITH, VALUES or ``(``; a
  write or control keyword (DROP, INSERT, PRAGMA, ATTACH, …) is *refused*; anything else, an
  empty text or a second statement after ``;`` is an *error*;
- whether the query is **bounded**: every function it calls is one whose cost is linear in its
  arguments and whose value is no larger than them (count, sum, substr, lower, …), no recursive
  CTE, and every LIKE / GLOB pattern is a short string literal. A bounded query can only work on
  the database's own values and is stopped by SQLite's progress handler between calls, so it may
  run in the evaluator's process. Anything else (``instr``, ``replace``, ``printf``,
  ``zeroblob``, a computed LIKE pattern, a recursive CTE, an unknown name followed by ``(``)
  may spend minutes or gigabytes inside one SQLite call that nothing interrupts: it runs in a
  killable worker process (see `cm_gym.domains.sql.evaluator`). When in doubt the answer is
  "not bounded": that costs a pipe round trip, never safety.

Every regular expression here has alternatives that either fail within a constant number of
characters or succeed on everything they scanned, so the whole pass is linear in the text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

MAX_PATTERN_CHARS = 200
MAX_CONCATENATIONS = 16

#: literals, quoted identifiers and comments, SQLite's lexical rules (see module doc)
_OPAQUE = re.compile(
    r"""--[^\n]*|/\*.*?(?:\*/|\Z)|'[^']*(?:''[^']*)*'?|"[^"]*(?:""[^"]*)*"?|`[^`]*(?:``[^`]*)*`?|\[[^\]]*\]?""",
    re.S,
)
_OPAQUE_START = re.compile(r"['\"`\[]|--|/\*")
_FIRST = re.compile(r"\s*([^\W\d][\w$]*|\S)")
_PATTERN = re.compile(r"\b(like|glob|match|regexp)\b\s*(\S?)")
_SHORT = {"'s'", '"s"'}
_NAME_CHARS = frozenset("_$")

START = frozenset({"select", "with", "values", "("})
WRITE = frozenset({
    "drop", "insert", "update", "delete", "create", "alter", "attach", "detach", "pragma", "vacuum",
    "begin", "commit", "end", "rollback", "savepoint", "release", "replace", "reindex", "analyze",
    "explain", "upsert",
})  # fmt: skip
#: functions linear in their arguments whose value is no larger than them (or a number)
BOUNDED_FUNCTIONS = frozenset({
    "count", "sum", "total", "avg", "min", "max", "abs", "lower", "upper", "length", "substr",
    "substring", "round", "coalesce", "ifnull", "nullif", "iif", "typeof", "date", "time",
    "datetime", "julianday", "unixepoch", "cast", "likely", "unlikely", "sign", "ceil", "ceiling",
    "floor", "trunc", "random", "changes", "total_changes", "last_insert_rowid",
})  # fmt: skip
#: keywords that may be followed by "(" without being a function call
_SYNTAX_BEFORE_PAREN = frozenset({
    "in", "exists", "values", "as", "on", "using", "over", "filter", "and", "or", "not", "select",
    "from", "join", "where", "having", "by", "then", "else", "when", "case", "is", "between",
    "all", "union", "intersect", "except", "distinct", "with", "limit", "offset", "like", "glob",
    "escape", "set", "into", "return", "returning", "cross", "inner", "outer", "left", "right",
    "full", "natural", "partition", "window", "materialized", "nulls", "first", "last", "asc",
    "desc", "collate", "isnull", "notnull", "null", "group", "order", "end",
})  # fmt: skip
_PATTERN_OPS = frozenset({"like", "glob", "match", "regexp"})


@dataclass(frozen=True)
class Vetting:
    """What `vet` decided. `status`: "ok", "refused" or "error" (then `reason` says why);
    `bounded`: safe to run in-process (see module doc); `why_unbounded`: the first reason not."""

    status: str
    reason: str = ""
    bounded: bool = False
    why_unbounded: str = ""


def _mask(match: re.Match[str]) -> str:
    text = match.group()
    head = text[:1]
    if head == "-" or head == "/":
        return " "
    if head in "'\"":  # a string (or a double-quoted name SQLite may read as one)
        return head + ("S" if len(text) <= MAX_PATTERN_CHARS + 2 else "L") + head
    return "[N]"  # a quoted identifier


def mask(sql: str) -> str:
    """`sql` with comments blanked, literals replaced by ``'S'`` (short) / ``'L'`` (long) and
    quoted identifiers by ``[N]``: what is left is keywords, names, numbers and operators."""
    return _OPAQUE.sub(_mask, sql)


@functools.lru_cache(maxsize=8192)
def vet(sql: str) -> Vetting:
    """Classify one submitted statement (see module doc); linear in ``len(sql)``. Pure, so
    results are cached (agents resubmit the same queries)."""
    masked = mask(sql) if _OPAQUE_START.search(sql) else sql
    first = _FIRST.match(masked)
    if first is None:
        return Vetting("error", "empty query")
    word = first.group(1).lower()
    if word not in START:
        if word in WRITE:
            return Vetting("refused", "only a single SELECT (or WITH ... SELECT) query is allowed")
        return Vetting("error", "not a SQL query: expected one SELECT (or WITH ... SELECT) statement")
    semi = masked.find(";")
    if semi >= 0 and masked[semi:].strip("; \t\r\n\f\v"):
        return Vetting("error", "several statements: submit exactly one SQL query")
    why = _unbounded(masked)
    return Vetting("ok", bounded=not why, why_unbounded=why)


def _unbounded(masked: str) -> str:
    """The first reason the (masked) query may not be bounded, or "" when it is. Only string
    methods and one regex without nested quantifiers: linear, and fast on ordinary queries."""
    low = masked.lower()
    if "recursive" in low:
        return "recursive CTE"
    if low.count("||") > MAX_CONCATENATIONS:
        return f"more than {MAX_CONCATENATIONS} concatenations"
    if "?" in low or ":" in low or "@" in low or "$" in low:
        return "query parameter"
    if "(" in low:
        pieces = low.split("(")
        for piece in pieces[:-1]:
            why = _call_before(piece)
            if why:
                return why
    if "like" in low or "glob" in low or "match" in low or "regexp" in low:
        for m in _PATTERN.finditer(low):
            if low[m.start(2) : m.start(2) + 3] not in _SHORT:
                return f"{m.group(1).upper()} with a computed or long pattern"
    return ""


def _call_before(piece: str) -> str:
    """Why the "(" that follows `piece` may open an unbounded call ("" if it does not)."""
    end = len(piece.rstrip())
    if end == 0:
        return ""
    last = piece[end - 1]
    if last in "\"'`]":
        return "calls a quoted name"
    start = end
    while start > 0 and (piece[start - 1].isalnum() or piece[start - 1] in _NAME_CHARS):
        start -= 1
    name = piece[start:end]
    if not name or name in BOUNDED_FUNCTIONS or name in _SYNTAX_BEFORE_PAREN or name[0].isdigit():
        return ""
    return f"calls {name}()"
