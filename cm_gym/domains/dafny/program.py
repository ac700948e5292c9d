"""Static facts about a Dafny program (members, loops and their guards, what it uses), read from the
hints-removed program a task shows; plus the guard "shape" used to transfer annotations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cm_gym.domains.dafny.annotations import strip_block_comments

_MEMBER = re.compile(
    r"^\s*(?:ghost\s+|static\s+|twostate\s+|inductive\s+|abstract\s+)*"
    r"(method|lemma|function|predicate|constructor|colemma|copredicate)\b(?:\s+method)?"
    r"(?:\s*\{:[^}]*\})*\s+([A-Za-z_][\w'?]*)"
)
_WHILE = re.compile(r"^\s*while\b\s*(.*?)\s*(\{)?\s*$")
_IDENT = re.compile(r"(?<![.\w])[A-Za-z_][\w']*")
_KEYWORDS = {"old", "forall", "exists", "in", "if", "then", "else", "true", "false", "null", "this", "multiset",
             "seq", "set", "map", "int", "nat", "bool", "real", "char", "string", "var", "fresh"}  # fmt: skip


def code_lines(program: str) -> list[str]:
    """Program lines with ``//`` and ``/* */`` comments blanked (line numbers kept)."""
    out = []
    for line in strip_block_comments(program).splitlines():
        out.append(line.split("//", 1)[0] if '"' not in line else line)
    return out


@dataclass(frozen=True)
class Loop:
    """A ``while`` loop header: its 0-based line, guard text, and whether ``{`` ends the line
    (then no annotation can go between header and body without changing the line)."""

    line: int
    guard: str
    brace_on_header: bool


def loops(program: str) -> list[Loop]:
    """The program's while loops, in order."""
    found = []
    for i, line in enumerate(code_lines(program)):
        m = _WHILE.match(line)
        if m:
            guard = m.group(1).strip()
            if guard.startswith("(") and guard.endswith(")"):
                guard = guard[1:-1].strip()
            found.append(Loop(i, guard, m.group(2) is not None))
    return found


def members(program: str) -> list[tuple[str, str]]:
    """(kind, name) of each method / lemma / function / predicate declared."""
    return [(m.group(1), m.group(2)) for m in (_MEMBER.match(ln) for ln in code_lines(program)) if m]


_TOKEN = re.compile(r"[A-Za-z_][\w']*|\d+|<==>|==>|<==|\.\.|[<>=!]=|&&|\|\||\S")


def shape(expr: str) -> str:
    """An expression with identifiers abstracted to V (keywords and member names kept), spacing
    normalised: ``i < |s|`` → ``V < | V |``, ``k<a.Length`` → ``V < V . Length``."""
    abstracted = _IDENT.sub(lambda m: m.group(0) if m.group(0) in _KEYWORDS else "V", expr)
    return " ".join(_TOKEN.findall(abstracted))


def identifiers(expr: str) -> list[str]:
    """The non-keyword identifiers of `expr`, in order of appearance."""
    return [t for t in _IDENT.findall(expr) if t not in _KEYWORDS]


def rename(text: str, mapping: dict[str, str]) -> str:
    """`text` with whole-word identifiers renamed by `mapping`."""
    return _IDENT.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


def recursive_members(program: str) -> list[tuple[int, str]]:
    """(header line, name) of each member that calls itself within its own text (up to the next
    declaration)."""
    lines = code_lines(program)
    starts = [(i, m.group(2)) for i, m in ((i, _MEMBER.match(ln)) for i, ln in enumerate(lines)) if m]
    out = []
    for k, (i, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        region = "\n".join(lines[i:end])
        if len(re.findall(rf"(?<![\w.]){re.escape(name)}\s*\(", region)) > 1:
            out.append((i, name))
    return out


def program_features(program: str, name: str = "") -> dict[str, Any]:
    """JSON-serialisable features of a hints-removed program (for conditions and the error model)."""
    body = "\n".join(code_lines(program))
    mems = members(program)
    names = [n for _, n in mems]
    recursion = bool(recursive_members(program))
    lps = loops(program)
    return {
        "file": name,
        "members": names,
        "member_kinds": sorted({k for k, _ in mems}),
        "n_members": len(names),
        "n_loops": len(lps),
        "has_loop": bool(lps),
        "loop_guard_shapes": sorted({shape(lp.guard) for lp in lps}),
        "uses_sequences": bool(re.search(r"\bseq\s*<|\[\s*\.\.|\.\.\s*\]", body)),
        "uses_arrays": bool(re.search(r"\barray\d?\s*<|\.Length\b", body)),
        "uses_multiset": "multiset" in body,
        "uses_quantifiers": bool(re.search(r"\b(forall|exists)\b", body)),
        "has_recursion": recursion,
        "n_lines": len([ln for ln in body.splitlines() if ln.strip()]),
    }
