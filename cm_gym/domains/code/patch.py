"""The code-repair action format and its application.

An action is either
1. the **full corrected program** (preferred: what LLMs write most reliably, and what the
   simulated LLM and the edit operators produce), or
2. a **unified diff** against the task's buggy program (``---``/``+++`` headers optional, hunks
   start with ``@@``; line numbers are only hints: each hunk is located by its context lines,
   ignoring trailing whitespace).

`apply_patch` returns the patched program or raises `PatchError` with a reason (empty, too long,
a hunk that does not apply, a result that is not valid Python, a missing function under test);
the evaluator turns that into a scored ``Outcome(status="error")``.
"""

from __future__ import annotations

import ast
import re

from cm_gym.core.types import CmGymError
from cm_gym.domains.code.edits import parse_or_reason

MAX_PATCH_CHARS = 50_000
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


class PatchError(CmGymError):
    """A malformed or inapplicable code-repair action."""


def looks_like_diff(text: str) -> bool:
    """True when `text` is a unified diff rather than a program."""
    lines = text.lstrip().splitlines()
    return any(line.startswith("@@") for line in lines) and (
        any(line.startswith(("---", "+++")) for line in lines[:3]) or lines[0].startswith("@@")
    )


def _hunks(diff: str) -> list[tuple[int, list[str], list[str]]]:
    hunks: list[tuple[int, list[str], list[str]]] = []
    old: list[str] | None = None
    new: list[str] = []
    start = 0
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "diff ", "index ")) and old is None:
            continue
        m = _HUNK.match(line)
        if line.startswith("@@"):
            if old is not None:
                hunks.append((start, old, new))
            old, new = [], []
            start = int(m.group(1)) if m else 0
            continue
        if old is None:
            if line.strip():
                raise PatchError(f"diff text before the first hunk: {line[:60]!r}")
            continue
        if line.startswith("\\"):
            continue
        tag, body = (line[:1], line[1:]) if line else (" ", "")
        if tag == " ":
            old.append(body)
            new.append(body)
        elif tag == "-":
            old.append(body)
        elif tag == "+":
            new.append(body)
        else:
            raise PatchError(f"malformed diff line: {line[:60]!r}")
    if old is not None:
        hunks.append((start, old, new))
    if not hunks:
        raise PatchError("diff has no hunks")
    return hunks


def apply_unified_diff(original: str, diff: str) -> str:
    """Apply `diff` to `original`, locating each hunk by its context (nearest to its line hint)."""
    lines = original.splitlines()
    offset = 0
    for n, (start, old, new) in enumerate(_hunks(diff), 1):
        key = [s.rstrip() for s in old]
        hits = [
            i
            for i in range(len(lines) - len(old) + 1)
            if [s.rstrip() for s in lines[i : i + len(old)]] == key
        ]
        if not old:
            hits = [max(0, min(len(lines), start - 1 + offset))]
        if not hits:
            raise PatchError(f"hunk {n} does not apply: its context/removed lines are not in the program")
        hint = start - 1 + offset
        at = min(hits, key=lambda i: abs(i - hint))
        lines[at : at + len(old)] = new
        offset += len(new) - len(old)
    return "\n".join(lines) + "\n"


def apply_patch(original: str, action: str, function: str = "") -> str:
    """The program an action stands for (see module doc); raises `PatchError`."""
    text = action.strip("\n")
    if not text.strip():
        raise PatchError("empty patch")
    if len(text) > MAX_PATCH_CHARS:
        raise PatchError(f"patch too long ({len(text)} > {MAX_PATCH_CHARS} characters)")
    program = apply_unified_diff(original, text) if looks_like_diff(text) else text + "\n"
    tree, why = parse_or_reason(program)
    if tree is None:
        raise PatchError(f"patched program is not valid Python: {why}")
    if function and not any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function for n in ast.walk(tree)
    ):
        raise PatchError(f"patched program does not define the function under test, {function!r}")
    return program
