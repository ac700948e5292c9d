"""A small, bounded s-expression reader for SMT-LIB text (no evaluation, no recursion limits hit).

Atoms are kept as strings: symbols, numerals, decimals, ``#x``/``#b`` literals, keywords, quoted
``|symbols|`` and ``"strings"``. ``;`` starts a comment. Limits on characters, tokens and nesting
depth turn a huge or adversarial input into one `SexprError` instead of a hang.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cm_gym.domains.smt.errors import SexprError

Sexpr = str | list["Sexpr"]

MAX_CHARS = 200_000
MAX_TOKENS = 100_000
MAX_DEPTH = 200

_TOKEN = re.compile(r'\s*(?:(;[^\n]*)|(\()|(\))|(\|[^|]*\|)|("(?:[^"]|"")*")|([^\s()|";]+))', re.S)


@dataclass(frozen=True)
class Located:
    """A top-level s-expression with the 1-based line where it starts."""

    expr: Sexpr
    line: int


def parse_sexprs(text: str, *, max_chars: int = MAX_CHARS, max_tokens: int = MAX_TOKENS) -> list[Located]:
    """All top-level s-expressions of `text` (a `SexprError` when malformed or over a limit)."""
    if len(text) > max_chars:
        raise SexprError(f"input has {len(text)} characters; the limit is {max_chars}")
    stack: list[list[Sexpr]] = []
    starts: list[int] = []
    out: list[Located] = []
    pos, tokens, line = 0, 0, 1
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SexprError(f"line {line}: unexpected character {text[pos : pos + 1]!r}")
        tok_line = line + text.count("\n", pos, m.start(m.lastindex or 0))
        line += text.count("\n", pos, m.end())
        pos = m.end()
        if m.group(1) is not None:
            continue
        tokens += 1
        if tokens > max_tokens:
            raise SexprError(f"more than {max_tokens} tokens")
        if m.group(2):
            if len(stack) >= MAX_DEPTH:
                raise SexprError(f"line {tok_line}: nesting deeper than {MAX_DEPTH}")
            stack.append([])
            starts.append(tok_line)
        elif m.group(3):
            if not stack:
                raise SexprError(f"line {tok_line}: unbalanced ')'")
            done = stack.pop()
            start = starts.pop()
            if stack:
                stack[-1].append(done)
            else:
                out.append(Located(done, start))
        else:
            atom = m.group(m.lastindex or 0)
            if not stack:
                raise SexprError(f"line {tok_line}: atom {atom[:30]!r} outside parentheses")
            stack[-1].append(atom)
    if stack:
        raise SexprError(f"line {starts[-1]}: unbalanced '(' (missing ')')")
    return out


def render(expr: Sexpr) -> str:
    """SMT-LIB text of an s-expression (single line)."""
    if isinstance(expr, str):
        return expr
    return "(" + " ".join(render(e) for e in expr) + ")"


def atoms(expr: Sexpr) -> list[str]:
    """Every atom of `expr`, depth first (iterative, so deep inputs cannot overflow the stack)."""
    out: list[str] = []
    todo: list[Sexpr] = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, str):
            out.append(e)
        else:
            todo.extend(reversed(e))
    return out
