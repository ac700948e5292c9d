"""Dafny edit operators and record transfer; the simulated LLM's error model on them is `errormodel.py`.

- Edits of an annotated program change one annotation: drop it, flip one comparison in it
  (``<`` ↔ ``<=``), shift a bound by one, or add a guard-derived bound invariant / decreases
  clause at a loop that has room for one.
- Error model (`errormodel.py`): drafts are the ground truth with the recurring slips of `slips` (a bound invariant
  written like its guard, a slice invariant or a decreases clause left out, each tied to program
  features), plus hints dropped at random (an invariant, an assertion — more often in programs
  with several loops or quantifiers), an invariant's bound off by one, or no hints at all.
- `transfer_annotations` moves a record's added/changed annotation to the draft's loop whose
  guard has the same shape, renaming the guard's identifiers (``i < |s|`` ↔ ``k < |xs|``).
"""

from __future__ import annotations

import re

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit
from cm_gym.domains.dafny.annotations import (
    Annotation,
    AnnotationError,
    annotation_changes,
    extract_annotations,
    insert_after,
    norm,
    remove_annotation,
    replace_annotation,
)
from cm_gym.domains.dafny.program import identifiers, loops, rename, shape
from cm_gym.domains.dafny.slips import (
    family_repairs,
)

MAX_EDITS = 40
_CMP = re.compile(r"<=|>=|<(?![=>])|>(?![=])")
_FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_PLUS1 = re.compile(r"\b([A-Za-z_]\w*)\s*\+\s*1\b")


def annotations_of(task: Task, action: str) -> list[Annotation] | None:
    """The annotations `action` adds to the task's program, or None if the action is invalid."""
    try:
        return extract_annotations(str(task.meta.get("program", "")), action)
    except AnnotationError:
        return None


def _flips(text: str) -> list[str]:
    out = []
    for m in _CMP.finditer(text):
        out.append(text[: m.start()] + _FLIP[m.group(0)] + text[m.end() :])
    return out


def _shifts(text: str) -> list[str]:
    out = []
    for m in _PLUS1.finditer(text):
        out.append(text[: m.start()] + m.group(1) + text[m.end() :])
    for m in _CMP.finditer(text):
        rest = text[m.end() :]
        tok = re.match(r"\s*([A-Za-z_][\w.]*|\|[^|]+\||\d+)", rest)
        if tok:
            end = m.end() + tok.end()
            out.append(text[:end] + " + 1" + text[end:])
            break
    return out


def dafny_edit_operators(task: Task, action: str) -> list[Edit]:
    """Single-annotation edits of `action`, deterministic order, at most `MAX_EDITS`: first the
    repairs of the slip families (`slips.family_repairs`: restore a weakened bound, add a slice
    invariant or a guard-derived bound / measure), then drops, flips and shifts of each annotation."""
    anns = annotations_of(task, action)
    if anns is None:
        return []
    edits: list[Edit] = list(family_repairs(task, action))
    for ann in anns:
        first = ann.text.splitlines()[0]
        edits.append(Edit(remove_annotation(action, ann), f"line {ann.line + 1}", f"drop `{first}`"))
        for alt in _flips(ann.text) + _shifts(ann.text):
            edits.append(
                Edit(replace_annotation(action, ann, alt), f"line {ann.line + 1}", f"`{first}` -> `{alt}`")
            )
    seen: set[str] = set()
    unique = [e for e in edits if e.text != action and not (e.text in seen or seen.add(e.text))]
    return unique[:MAX_EDITS]


def _anchor_loop(action: str, line: int) -> str | None:
    """Guard of the nearest loop header above `line` (the loop an annotation belongs to)."""
    above = [lp for lp in loops(action) if lp.line < line]
    return above[-1].guard if above else None


def transfer_annotations(program: str, draft: str, a_minus: str, a_plus: str) -> str | None:
    """The record's annotation change, moved onto `draft` (see module doc); None if no site."""
    added, removed = annotation_changes(a_minus, a_plus)
    try:
        draft_anns = extract_annotations(program, draft)
    except AnnotationError:
        return None
    out = draft
    changed = False
    for ann in removed:
        guard = _anchor_loop(a_minus, ann.line)
        for target in _targets(out, guard):
            text = rename(ann.text, target[1])
            hit = [d for d in draft_anns if norm(d.text) == norm(text)]
            if hit:
                out = remove_annotation(out, hit[0])
                draft_anns = extract_annotations(program, out)
                changed = True
                break
    for ann in added:
        if ann.keyword == "assert":
            sites = _assert_targets(a_plus, ann, out)
        else:
            sites = _targets(out, _anchor_loop(a_plus, ann.line))
        for line, mapping in sites:
            text = rename(ann.text, mapping)
            if any(norm(d.text) == norm(text) for d in draft_anns):
                break
            out = insert_after(out, line, text)
            draft_anns = extract_annotations(program, out)
            changed = True
            break
    return out if changed else None


def _assert_targets(source: str, ann: Annotation, draft: str) -> list[tuple[int, dict[str, str]]]:
    """Where an added assertion goes in `draft`: after the same program line it followed."""
    lines = source.splitlines()
    prev = next((norm(lines[i]) for i in range(ann.line - 1, -1, -1) if norm(lines[i])), "")
    if not prev:
        return []
    return [(i, {}) for i, line in enumerate(draft.splitlines()) if norm(line) == prev][:1]


def _targets(draft: str, guard: str | None) -> list[tuple[int, dict[str, str]]]:
    """Draft loops whose guard has the same shape as `guard`, with the identifier renaming."""
    if guard is None:
        return []
    src = identifiers(guard)
    out = []
    for loop in loops(draft):
        if loop.brace_on_header or shape(loop.guard) != shape(guard):
            continue
        dst = identifiers(loop.guard)
        if len(dst) == len(src):
            out.append((loop.line, dict(zip(src, dst, strict=True))))
    return out
