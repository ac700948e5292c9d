"""The Dafny action format: the task's program with proof annotations added, nothing else.

An action is the **full annotated program**: every line of the task's (hints-removed) program,
unchanged and in order (whitespace and trailing ``//`` comments may differ; comment-only and
blank lines are ignored), plus inserted annotation lines. Each inserted annotation starts with
``invariant``, ``assert`` or ``decreases`` on its own line and may continue on following lines
(an expression that does not fit on one line); one annotation is one decision unit. Refused,
with a reason (`AnnotationError`): changed or removed program lines, inserted lines that are not
annotations (statements, ``requires``/``ensures``/``modifies``/``reads``), ``assume``, and
attributes that switch verification off (``{:verify false}``, ``{:axiom}``, ``{:extern}``, …).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from cm_gym.types import CmGymError

KEYWORDS = ("invariant", "assert", "decreases")
_START = re.compile(r"^(invariant|assert|decreases)\b")
_FORBIDDEN_START = re.compile(
    r"^(var|if|while|for|return|method|function|lemma|predicate|class|datatype|codatatype|module|import|"
    r"requires|ensures|modifies|reads|assume|print|else|match|case|include|ghost|type|const|iterator|"
    r"constructor|twostate|abstract|trait|newtype)\b"
)
_FORBIDDEN = re.compile(r"\bassume\b|\{:\s*(verify|axiom|extern|imported|trusted|opaque|autocontracts)\b")
MAX_PROGRAM_CHARS = 200_000


class AnnotationError(CmGymError):
    """The action is not the task's program plus annotations."""


@dataclass(frozen=True)
class Annotation:
    """One inserted annotation: its text (lines joined by newlines) and its first line's index
    in the action's lines (0-based)."""

    text: str
    line: int

    @property
    def keyword(self) -> str:
        m = _START.match(self.text)
        return m.group(1) if m else ""


def norm(line: str) -> str:
    """A program line for comparison: no trailing ``//`` comment, whitespace collapsed."""
    if "//" in line and '"' not in line:
        line = line.split("//", 1)[0]
    return " ".join(line.split())


_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def strip_block_comments(text: str) -> str:
    """`text` with ``/* ... */`` comments blanked (their newlines kept, so line numbers hold)."""
    return _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _significant(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if norm(line)]


def extract_annotations(program: str, action: str) -> list[Annotation]:
    """The annotations `action` adds to `program`; raises `AnnotationError` (see module doc)."""
    if len(action) > MAX_PROGRAM_CHARS:
        raise AnnotationError(f"action too long ({len(action)} characters)")
    p_lines = strip_block_comments(program).splitlines()
    a_lines = strip_block_comments(action).splitlines()
    p_idx, a_idx = _significant(p_lines), _significant(a_lines)
    p_norm = [norm(p_lines[i]) for i in p_idx]
    a_norm = [norm(a_lines[i]) for i in a_idx]
    matcher = difflib.SequenceMatcher(a=p_norm, b=a_norm, autojunk=False)
    inserted: list[list[int]] = []
    for op, i1, _i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if op in ("delete", "replace"):
            line = p_idx[i1] + 1
            raise AnnotationError(
                f"program line {line} was changed or removed ({p_lines[p_idx[i1]].strip()[:80]!r}); "
                "only annotation lines may be added"
            )
        inserted.append([a_idx[j] for j in range(j1, j2)])
    annotations: list[Annotation] = []
    for group in inserted:
        current: list[str] = []
        start = -1
        for k in group:
            text = a_lines[k].strip()
            if "//" in text and '"' not in text and not text.startswith("//"):
                text = text.split("//", 1)[0].rstrip()
            if text.startswith("//"):
                continue
            if "/*" in text or "*/" in text:
                raise AnnotationError(f"inserted line {k + 1} opens or closes a block comment")
            if _FORBIDDEN.search(text):
                raise AnnotationError(f"inserted line {k + 1} uses a forbidden construct: {text[:80]!r}")
            if _START.match(text):
                if current:
                    annotations.append(Annotation("\n".join(current), start))
                current, start = [text], k
                continue
            if not current or _FORBIDDEN_START.match(text) or ":=" in text:
                raise AnnotationError(
                    f"inserted line {k + 1} is not an annotation (invariant / assert / decreases): {text[:80]!r}"
                )
            current.append(text)
        if current:
            annotations.append(Annotation("\n".join(current), start))
    return annotations


def ground_truth_hints(program: str, ground_truth: str) -> list[Annotation]:
    """The hints of a ground-truth file relative to its hints-removed program (same format)."""
    return extract_annotations(program, ground_truth)


def remove_annotation(action: str, ann: Annotation) -> str:
    """`action` without `ann` (all of its lines)."""
    lines = action.splitlines()
    n = len(ann.text.splitlines())
    end = ann.line
    seen = 0
    while end < len(lines) and seen < n:
        if lines[end].strip() and not lines[end].strip().startswith("//"):
            seen += 1
        end += 1
    return "\n".join(lines[: ann.line] + lines[end:]) + "\n"


def replace_annotation(action: str, ann: Annotation, new_text: str) -> str:
    """`action` with `ann` replaced by `new_text` (indentation kept)."""
    lines = action.splitlines()
    indent = lines[ann.line][: len(lines[ann.line]) - len(lines[ann.line].lstrip())]
    removed = remove_annotation(action, ann).splitlines()
    new_lines = [indent + t for t in new_text.splitlines()]
    return "\n".join(removed[: ann.line] + new_lines + removed[ann.line :]) + "\n"


def insert_after(action: str, line_index: int, text: str) -> str:
    """`action` with annotation `text` inserted after line `line_index` (indented one level
    deeper than that line when it opens a block, else like the next line)."""
    lines = action.splitlines()
    base = lines[line_index]
    indent = base[: len(base) - len(base.lstrip())]
    nxt = lines[line_index + 1] if line_index + 1 < len(lines) else ""
    nxt_indent = nxt[: len(nxt) - len(nxt.lstrip())]
    if len(nxt_indent) > len(indent):
        indent = nxt_indent
    else:
        indent += "  "
    new = [indent + t for t in text.splitlines()]
    return "\n".join(lines[: line_index + 1] + new + lines[line_index + 1 :]) + "\n"


def annotation_changes(a_minus: str, a_plus: str) -> tuple[list[Annotation], list[Annotation]]:
    """(added, removed) annotations between two versions of *any* program (lines positioned in
    a⁺ and a⁻ respectively); works across tasks, unlike `extract_annotations`."""
    minus = strip_block_comments(a_minus).splitlines()
    plus = strip_block_comments(a_plus).splitlines()
    matcher = difflib.SequenceMatcher(a=[norm(x) for x in minus], b=[norm(x) for x in plus], autojunk=False)
    added: list[Annotation] = []
    removed: list[Annotation] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        removed.extend(_group(minus, range(i1, i2)))
        added.extend(_group(plus, range(j1, j2)))
    return added, removed


def _group(lines: list[str], indices: range) -> list[Annotation]:
    out: list[Annotation] = []
    current: list[str] = []
    start = -1
    for k in indices:
        text = norm(lines[k])
        if not text:
            continue
        if _START.match(text):
            if current:
                out.append(Annotation("\n".join(current), start))
            current, start = [text], k
        elif current and not _FORBIDDEN_START.match(text):
            current.append(text)
        else:
            if current:
                out.append(Annotation("\n".join(current), start))
            current = []
    if current:
        out.append(Annotation("\n".join(current), start))
    return out
