"""A Dafny program inside a reply's prose, and the canonical form of a Dafny program.

Models answer "I apologize for the error. Here is a corrected version:" and then the program,
sometimes followed by "This version adds …". The recogniser starts at the first line that begins
a top-level declaration (``method``, ``function``, ``predicate``, ``lemma``, ``class``, ``module``,
``datatype``, …; the ``//`` comment lines right above it come along) and runs to the first
unindented line, outside braces, that reads as prose; a program cut off inside a body runs to
the end; a text that is only comments (code commented out) is a program too. One pass, comments
and strings respected for the brace depth. Two programs are the same
when Dafny's scanner sees the same tokens (`cm_gym.domains.dafny.tokens`: comments and layout
never count).
"""

from __future__ import annotations

from cm_gym.domains.reply import prose_line, word_at

DECLARATIONS = frozenset(
    [
        "method",
        "function",
        "predicate",
        "lemma",
        "class",
        "module",
        "datatype",
        "codatatype",
        "include",
        "import",
        "const",
        "type",
        "ghost",
        "twostate",
        "iterator",
        "trait",
        "newtype",
        "abstract",
        "opaque",
        "static",
        "constructor",
        "colemma",
        "inductive",
        "copredicate",
        "least",
        "greatest",
        "export",
        "refines",
    ]
)


def _declaration(line: str) -> bool:
    return word_at(line.lstrip(), 0) in DECLARATIONS


def _depth_after(line: str, depth: int, in_comment: bool) -> tuple[int, bool]:
    """Brace depth and block-comment state after `line` (strings and comments skipped)."""
    i, n = 0, len(line)
    while i < n:
        if in_comment:
            close = line.find("*/", i)
            if close == -1:
                return depth, True
            i, in_comment = close + 2, False
            continue
        ch = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            in_comment, i = True, i + 2
            continue
        if ch == '"':
            close = line.find('"', i + 1)
            while close != -1 and line[close - 1] == "\\":
                close = line.find('"', close + 1)
            i = n if close == -1 else close + 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        i += 1
    return depth, in_comment


def _comment_only_lines(lines: list[str]) -> list[bool]:
    """Per line: blank or only comment (a ``//`` line, or inside / opening / closing a ``/* */``)."""
    out: list[bool] = []
    in_comment = False
    for line in lines:
        rest, i = [], 0
        while i < len(line):
            if in_comment:
                close = line.find("*/", i)
                if close == -1:
                    i = len(line)
                    break
                in_comment, i = False, close + 2
            elif line.startswith("//", i):
                break
            elif line.startswith("/*", i):
                in_comment, i = True, i + 2
            else:
                rest.append(line[i])
                i += 1
        out.append(not "".join(rest).strip())
    return out


def find_program(text: str) -> str | None:
    """The Dafny program stated in `text`, or None (see the module docstring)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _declaration(line)), None)
    if start is None:
        return _comments_only(text)
    quiet = _comment_only_lines(lines[:start])
    while start > 0 and quiet[start - 1]:
        start -= 1  # the comments (and blank lines) above the first declaration belong to it
    depth, in_comment, end = 0, False, len(lines)
    for i in range(start, len(lines)):
        line = lines[i]
        if i > start and depth == 0 and not in_comment and prose_line(line):
            end = i
            break
        depth, in_comment = _depth_after(line, depth, in_comment)
    block = lines[start:end]
    while block and not block[-1].strip():
        block.pop()
    return "\n".join(block) or None


def _comments_only(text: str) -> str | None:
    """A program that is all comments (a file whose code is commented out) is a program."""
    from cm_gym.domains.dafny.tokens import tokenize

    return text.strip() if text.strip().startswith(("//", "/*")) and not tokenize(text) else None


def canonical(text: str) -> str:
    """The token texts, space-separated (Dafny's own scanner rules)."""
    from cm_gym.domains.dafny.tokens import tokenize

    return " ".join(token.text for token in tokenize(text))
