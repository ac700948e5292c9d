"""A Python program (or a unified diff) inside a reply's prose, and the canonical form of code.

The recogniser looks for a unified diff first (a ``--- `` / ``+++ `` header or an ``@@`` hunk and
the lines that continue it), then for Python: the block from the first line that starts a module
statement at column 0 (``def``, ``class``, ``import``, ``from … import``, a decorator, or a ``#``
comment right above one of them; from the text's start when all of that parses, so module code
above the first def is kept) to the first unindented line that reads as prose (a text without
such a line that parses as more than one bare expression is a script too). When that
block does not parse, trailing lines are dropped one at a time (at most `MAX_TRIMS`) until it
does; if it never parses it is returned as it is, so the sandbox reports the syntax error. Two
programs are the same when their ASTs are (comments, blank lines and formatting never count).
"""

from __future__ import annotations

import ast
import warnings

from cm_gym.domains.reply import prose_line

MAX_TRIMS = 8
MAX_CHARS = 200_000
_KEYWORDS = frozenset({"none", "true", "false"})


def _starts_code(line: str) -> bool:
    """A module statement at column 0: def / class / import / from … import / a decorator."""
    words = line.rstrip().split()
    if not words or line[0].isspace():
        return False
    if words[0].startswith("@"):
        return len(words[0]) > 1
    if words[0] == "from":
        return "import" in words[2:3]
    if words[0] == "async":
        return words[1:2] == ["def"] and len(words) > 2
    return words[0] in ("def", "class", "import") and len(words) > 1


def find_diff(text: str) -> str | None:
    """The first unified diff of `text` (headers, hunks and their lines), or None."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        header = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        if not (header or line.startswith("@@ ")):
            continue
        j = i + (2 if header else 0)
        while j < len(lines) and (lines[j][:1] in (" ", "+", "-", "\\") or lines[j].startswith("@@")):
            j += 1
        return "\n".join(lines[i:j]).rstrip()
    return None


def _tree(source: str) -> ast.Module | None:
    """`ast.parse` of `source`, None when it does not parse (or is over `MAX_CHARS`); quiet about
    the SyntaxWarnings of model-written code."""
    if len(source) > MAX_CHARS:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _parses(source: str) -> bool:
    return _tree(source) is not None


def find_program(text: str) -> str | None:
    """The Python program stated in `text`, or None (see the module docstring)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _starts_code(line)), None)
    if start is None:
        return _script(text)
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1  # a comment right above the first statement belongs to it
    end = start + 1
    while end < len(lines) and not prose_line(lines[end], _KEYWORDS, headings=False):
        end += 1
    if start and _parses("\n".join(lines[:end])):
        start = 0  # module code above the first def (``FIX = \"\"\"…\"\"\"``) belongs to the program
    block = lines[start:end]
    while block and not block[-1].strip():
        block.pop()
    whole = list(block)
    for _ in range(MAX_TRIMS):
        if _parses("\n".join(block)):
            return "\n".join(block).rstrip() or None
        if len(block) <= 1:
            break
        block.pop()
        while block and not block[-1].strip():
            block.pop()
    return "\n".join(whole).rstrip() or None  # never parses: as written, the sandbox says why


def _script(text: str) -> str | None:
    """A text that is a Python script without a def/import (``n = int(input())``…): it parses
    and holds a statement other than one bare expression (prose like "Yes" is one)."""
    tree = _tree(text.strip()) if text.strip() else None
    if tree is None:
        return None
    body, source = tree.body, text.strip()
    return source if len(body) > 1 or (body and not isinstance(body[0], ast.Expr)) else None


def find_action(text: str) -> str | None:
    """A unified diff in `text`, else a Python program, else None."""
    return find_diff(text) or find_program(text)


def canonical(text: str) -> str:
    """``ast.dump`` of the program (formatting and comments never count); the collapsed text
    when it does not parse (a diff, a syntax error)."""
    tree = _tree(text)
    return ast.dump(tree) if tree is not None else " ".join(text.split())
