"""The simulated LLM's code-repair slips, local edits of a failed patch, and record transfer.

Error model: a draft is the reference with slips reintroduced — the task's bug left unfixed (more
often for subtle classes such as flipped comparisons and off-by-ones), a boundary comparison
flipped (more often when the description uses boundary words), a bound off by one (in loops), a
base case dropped (in recursion), call arguments swapped, a variable confused — so the first
draft is sometimes right and sometimes plausibly wrong.

`apply_contrast` transfers a record's fix as *the same kind of edit* (same operator change, same
±1 shape, same name swap) onto another draft, at the site most similar to where it was learnt;
it never reads the reference.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit, ErrorModel, ErrorOperator
from cm_gym.domains.code.edits import Mutation, enumerate_mutations, mutations_between
from cm_gym.domains.code.patch import PatchError, apply_patch

MAX_EDITS = 40
_LEAVE_BUG = {
    "flipped_comparison": 0.55,
    "off_by_one": 0.5,
    "wrong_variable": 0.4,
    "swapped_arguments": 0.35,
    "wrong_operator": 0.35,
    "missing_condition": 0.45,
    "missing_code": 0.45,
    "missing_base_case": 0.3,
}


def _f(task: Task, key: str, default: object = None) -> object:
    return task.features.get(key, default)


def _leave_bug(task: Task, action: str, rng: np.random.Generator) -> str | None:
    buggy = task.meta.get("buggy")
    return str(buggy) if buggy else None


def _mutator(*kinds: str) -> Callable[[Task, str, np.random.Generator], str | None]:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        cands = [m for m in enumerate_mutations(action) if m.kind in kinds]
        if not cands:
            return None
        return cands[int(rng.integers(len(cands)))].apply(action)

    return apply


def code_error_model() -> ErrorModel:
    """Feature-dependent slips (see module doc)."""
    ops = (
        ErrorOperator(
            "leave_bug_unfixed",
            lambda t: _LEAVE_BUG.get(str(_f(t, "bug_class", "")), 0.4) if t.meta.get("buggy") else 0.0,
            _leave_bug,
        ),
        ErrorOperator(
            "flip_boundary",
            lambda t: (0.2 if _f(t, "boundary") else 0.06) if _f(t, "comparisons") else 0.0,
            _mutator("flip_comparison"),
        ),
        ErrorOperator(
            "off_by_one_bound",
            lambda t: 0.12 if _f(t, "has_loop") else 0.04,
            _mutator("plus_one", "minus_one"),
        ),
        ErrorOperator(
            "drop_base_case", lambda t: 0.1 if _f(t, "has_recursion") else 0.0, _mutator("remove_base_case")
        ),
        ErrorOperator("swap_arguments", lambda t: 0.05, _mutator("swap_arguments")),
        ErrorOperator("confuse_variable", lambda t: 0.04, _mutator("change_variable")),
    )
    return ErrorModel(operators=ops)


def _program(task: Task, action: str) -> str | None:
    """A full program for `action` (a diff is applied to the buggy program, never the reference)."""
    try:
        return apply_patch(str(task.meta.get("buggy", "")), action)
    except PatchError:
        return None


def code_edit_operators(task: Task, action: str) -> list[Edit]:
    """Single-unit local edits of `action` (a full program), in a deterministic order."""
    program = _program(task, action)
    if program is None:
        return []
    base = action if program.strip() == action.strip() else program
    edits = []
    for m in enumerate_mutations(base)[:MAX_EDITS]:
        edits.append(Edit(text=m.apply(base), unit=f"line {m.line}", description=m.description))
    return edits


def _line_of(source: str, m: Mutation) -> str:
    start = source.rfind("\n", 0, m.start) + 1
    end = source.find("\n", m.end)
    return source[start : end if end >= 0 else len(source)].strip()


def _shape(m: Mutation) -> str:
    """The edit with its operand abstracted: "{X} + 1", "<= -> <", "0 -> 1"."""
    old, new = m.old.strip(), m.new.strip()
    if old and old in new:
        return new.replace(old, "{X}", 1)
    if new and new in old:
        return old.replace(new, "{X}", 1) + " (removed)"
    return f"{old} -> {new}"


def transfer_contrast(draft: str, a_minus: str, a_plus: str) -> str | None:
    """Apply the fix a⁻ → a⁺ as the same kind of single edit to `draft` (None if it has no site)."""
    learnt = mutations_between(a_minus, a_plus)
    if learnt is None:
        return None
    shape = _shape(learnt)
    context = _line_of(a_minus, learnt)
    best: tuple[float, Mutation] | None = None
    for cand in enumerate_mutations(draft):
        if cand.kind != learnt.kind or _shape(cand) != shape:
            continue
        if learnt.kind == "change_variable" and (cand.old, cand.new) != (learnt.old, learnt.new):
            continue
        score = difflib.SequenceMatcher(a=context, b=_line_of(draft, cand), autojunk=False).ratio()
        if best is None or score > best[0]:
            best = (score, cand)
    return best[1].apply(draft) if best is not None else None
