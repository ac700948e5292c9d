"""Dafny 2.3's own token stream: comments and whitespace removed exactly as its Coco/R scanner
removes them, so that the annotation checker and the verifier agree on what is code.

The scanner's rules, reproduced here:
- whitespace is space, tab, LF and CR only (anything else is a token, usually an error);
- a line comment runs from ``//`` through the next LF, where a CR *not* followed by LF also counts
  as LF (Coco normalises an isolated CR); an unterminated one runs to the end of the text;
- a block comment runs from ``/*`` to the matching ``*/`` and **nests**: ``/*`` inside raises
  the level, ``*/`` lowers it; an unterminated one swallows the rest of the text;
- comments are recognised only between tokens: ``"//"`` and ``'/'`` are literals;
- strings ``"..."`` (escapes ``\\'`` ``\\"`` ``\\\\`` ``\\0`` ``\\n`` ``\\r`` ``\\t`` ``\\uXXXX``, no
  line breaks), verbatim strings ``@"..."`` (``""`` escapes a quote; line breaks allowed), and
  character literals ``'c'`` — which compete with identifiers, since ``'`` is an identifier
  character: the longer match wins, a char literal on a tie (``'a'`` is a char, ``'a'b`` a name).

What matters for safety is one direction: nothing this tokenizer drops as a comment may be code
to Dafny. Where the two could differ at all (an invalid escape, a stray character), Dafny reports
a lexical error and verifies nothing.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_IDENT = re.compile(r"[A-Za-z'_?][A-Za-z0-9'_?]*")
_CHAR = re.compile(r"'(?:[^'\\\r\n]|\\['\"\\0nrt]|\\u[0-9A-Fa-f]{4})'")
_STRING = re.compile(r'"(?:[^"\\\r\n]|\\[\'"\\0nrt]|\\u[0-9A-Fa-f]{4})*"')
_VERBATIM = re.compile(r'@"(?:[^"]|"")*"')
_NUMBER = re.compile(r"0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|\d(?:_?\d)*(?:\.\d(?:_?\d)*)?")
_OPERATORS = (
    "<==>", "==>", "<==", "!in", "...", ":=", "::", ":|", "{:", "==", "!=", "<=", ">=", "&&", "||",
    "..", "=>", "->", "<-", "~>", "--", "++",
)  # fmt: skip
_OPERATOR = re.compile("|".join(re.escape(op) for op in _OPERATORS))
_SPACE = re.compile(r"[ \t\n\r]+")
_LINE_END = re.compile(r"\n|\r(?!\n)")
_NESTING = re.compile(r"/\*|\*/")


class Token(NamedTuple):
    """One token: its text, its offset in the source and its 0-based line."""

    text: str
    start: int
    line: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def _line_comment_end(src: str, i: int) -> int:
    """End (exclusive) of a ``//`` comment starting at `i`: after the next LF or lone CR."""
    m = _LINE_END.search(src, i + 2)
    return m.end() if m else len(src)


def _block_comment_end(src: str, i: int) -> int:
    """End (exclusive) of a nested ``/* */`` comment starting at `i` (the text's end if open).
    Scanning for the leftmost ``/*`` or ``*/`` is exactly the scanner's char-by-char loop: each
    character starts at most one of the two, and a match consumes both characters."""
    level, j = 1, i + 2
    while True:
        m = _NESTING.search(src, j)
        if m is None:
            return len(src)
        level += 1 if m.group() == "/*" else -1
        j = m.end()
        if level == 0:
            return j


def tokenize(src: str, issues: list[str] | None = None) -> list[Token]:
    """The tokens Dafny's scanner produces from `src` (see module doc). Linear time. An
    unterminated comment (which silently hides the rest of the text) is noted in `issues`."""
    out: list[Token] = []
    n = len(src)
    i = 0
    line = 0
    while i < n:
        c = src[i]
        if c in " \t\n\r":
            end = _SPACE.match(src, i).end()  # type: ignore[union-attr]
            line += _newlines(src, i, end)
            i = end
            continue
        if c == "/" and i + 1 < n and src[i + 1] in "/*":
            end = _line_comment_end(src, i) if src[i + 1] == "/" else _block_comment_end(src, i)
            if issues is not None and end == n and src[i + 1] == "*" and not src.endswith("*/"):
                issues.append(f"a block comment opened at line {line + 1} never closes")
            line += _newlines(src, i, end)
            i = end
            continue
        m = None
        if c == '"':
            m = _STRING.match(src, i)
        elif c == "@":
            m = _VERBATIM.match(src, i)
        elif c.isdigit():
            m = _NUMBER.match(src, i)
        elif c == "'" or c == "_" or c == "?" or ("a" <= c <= "z") or ("A" <= c <= "Z"):
            ident = _IDENT.match(src, i)
            char = _CHAR.match(src, i) if c == "'" else None
            m = char if char is not None and (ident is None or char.end() >= ident.end()) else ident
        if m is not None and m.end() > i:
            text = m.group()
        else:
            op = _OPERATOR.match(src, i)
            text = op.group() if op else c
            if text == "!in" and i + 3 < n and _IDENT.match(src[i + 3]):
                text = "!"  # "!in" is one token only before a non-identifier character
        out.append(Token(text, i, line))
        if c == "@":
            line += _newlines(src, i, i + len(text))  # only verbatim strings span lines
        i += len(text)
    return out


def _newlines(src: str, start: int, end: int) -> int:
    """Line breaks in ``src[start:end]`` counted like the scanner (CRLF and lone CR once)."""
    chunk = src[start:end]
    return chunk.count("\n") + chunk.count("\r") - chunk.count("\r\n")
