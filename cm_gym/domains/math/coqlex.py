"""A small lexer for Coq's vernacular: comments, strings, sentences, bullets and braces.

Coq's lexical rules that matter for deciding what a script *does* (Coq reference manual,
"Lexical conventions" and "Sentences"): comments ``(* … *)`` nest, and a string inside a comment
is lexed as a string (so ``(* "*)" *)`` is one comment); strings are ``"…"`` with ``""`` as the
escaped quote; a sentence ends at a period followed by a blank or the end of input; at the start
of a sentence a bullet (``-``, ``+``, ``*`` and their repetitions), a focusing brace ``{`` / ``}``,
or a goal selector followed by ``{`` (``2: {``) is a sentence of its own.

The checker never hands Coq the text it was given: it hands it the comment-free text this module
produced and vetted, so the lexer and Coq cannot disagree about what is code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cm_gym.core.types import CmGymError


class CoqSyntaxError(CmGymError):
    """Unterminated comment or string, or text that is not a sequence of Coq sentences."""


@dataclass(frozen=True)
class Sentence:
    """One Coq sentence: its comment-free text (terminating period included, blanks collapsed
    only at the ends) and `kind`: "bullet", "brace" (``{`` / ``}`` / ``N: {``) or "command"."""

    text: str
    kind: str
    start: int
    end: int


_IDENT_CHAR = re.compile(r"[\w']")
_BULLET = re.compile(r"(-+|\++|\*+)")
_SELECTOR_BRACE = re.compile(
    r"((?:all|!|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|\[\s*\w+\s*\])\s*:\s*)?\{"
)


def strip_comments(text: str) -> str:
    """`text` with every comment blanked: its characters become spaces, its line breaks stay, so
    offsets and line numbers hold. Strings are kept. Raises `CoqSyntaxError` for an unterminated
    comment or string."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            j = _skip_comment(text, i)
            out.append("".join("\n" if c == "\n" else " " for c in text[i:j]))
            i = j
        elif text[i] == '"':
            j = _skip_string(text, i)
            out.append(text[i:j])
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _skip_comment(text: str, i: int) -> int:
    """Index just past the comment opening at `i` (nested comments and strings inside)."""
    depth, j, n = 0, i, len(text)
    while j < n:
        if text.startswith("(*", j):
            depth += 1
            j += 2
        elif text.startswith("*)", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        elif text[j] == '"':
            j = _skip_string(text, j)
        else:
            j += 1
    raise CoqSyntaxError(f"unterminated comment starting at character {i}")


def _skip_string(text: str, i: int) -> int:
    """Index just past the string literal opening at `i` (``""`` is an escaped quote)."""
    j, n = i + 1, len(text)
    while j < n:
        if text[j] == '"':
            if j + 1 < n and text[j + 1] == '"':
                j += 2
                continue
            return j + 1
        j += 1
    raise CoqSyntaxError(f"unterminated string starting at character {i}")


def has_string(text: str) -> bool:
    """True when comment-free `text` contains a string literal."""
    return '"' in text


def split_sentences(text: str) -> list[Sentence]:
    """Split *comment-free* `text` into sentences (see module doc). Trailing text without a
    terminating period raises `CoqSyntaxError`."""
    sentences: list[Sentence] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return sentences
        m = _BULLET.match(text, i)
        if m and (m.end() >= n or not _continues_operator(text[m.end()])):
            sentences.append(Sentence(m.group(0), "bullet", i, m.end()))
            i = m.end()
            continue
        if text[i] == "}":
            sentences.append(Sentence("}", "brace", i, i + 1))
            i += 1
            continue
        m = _SELECTOR_BRACE.match(text, i)
        if m:
            sentences.append(Sentence(" ".join(m.group(0).split()), "brace", i, m.end()))
            i = m.end()
            continue
        end = _sentence_end(text, i)
        if end < 0:
            tail = " ".join(text[i:].split())[:60]
            raise CoqSyntaxError(f"text does not end with a period: {tail!r}")
        sentences.append(Sentence(text[i:end].strip(), "command", i, end))
        i = end


def _continues_operator(ch: str) -> bool:
    """A bullet is only a bullet when not glued to more operator characters (``->``, ``-1``)."""
    return ch in "-+*=<>>|&~!@#$%^/\\:;,?" or ch.isalnum() or ch in "_'"


def _sentence_end(text: str, i: int) -> int:
    """Index just past the period that ends the sentence starting at `i`, or -1."""
    n = len(text)
    j = i
    while j < n:
        ch = text[j]
        if ch == '"':
            j = _skip_string(text, j)
            continue
        if ch == "." and (j + 1 >= n or text[j + 1].isspace()):
            return j + 1
        j += 1
    return -1


_WORD = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*|\d+|\S")


def words(sentence: str) -> list[str]:
    """The identifiers (qualified ones kept whole), numbers and single punctuation characters of
    a comment-free, string-free sentence."""
    return _WORD.findall(sentence)


def first_word(sentence: str) -> str:
    """The sentence's first identifier-or-symbol (after blanks)."""
    found = _WORD.search(sentence)
    return found.group(0) if found else ""


def identifiers(sentence: str) -> list[str]:
    """The identifiers of a comment-free, string-free sentence (qualified ones split at dots too,
    so ``Z.abs`` yields ``Z.abs``, ``Z`` and ``abs``)."""
    out: list[str] = []
    for w in words(sentence):
        if _IDENT_CHAR.match(w) and not w[0].isdigit():
            out.append(w)
            if "." in w:
                out.extend(w.split("."))
    return out
