"""Dafny condition predicates, rule-based distillation and contrast keys.

Predicates read only ``Task.features`` of the hints-removed program (never the ground truth).
A distilled condition names the shape of the loop guard the annotation was learnt at, so that a
bound invariant learnt for ``i < |s|`` is not offered for a loop on ``i <= n``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, PredicateFn
from cm_gym.domains.dafny.annotations import annotation_changes, norm
from cm_gym.domains.dafny.program import loops, shape


def _feat(task: Task, key: str, default: object = None) -> object:
    return task.features.get(key, default) if task.domain == "dafny" else default


def _flag(key: str) -> PredicateFn:
    return lambda task, args: bool(_feat(task, key, False))


def _name_mentions(task: Task, args: tuple[str, ...]) -> bool:
    names = " ".join(_feat(task, "members", []) or []).lower()  # type: ignore[arg-type]
    return any(a.lower() in names for a in args)


def _member_kind_is(task: Task, args: tuple[str, ...]) -> bool:
    kinds = _feat(task, "member_kinds", []) or []
    return any(a in kinds for a in args)  # type: ignore[operator]


def _loops_at_least(task: Task, args: tuple[str, ...]) -> bool:
    try:
        return int(_feat(task, "n_loops", 0)) >= int(args[0])  # type: ignore[arg-type]
    except (IndexError, ValueError, TypeError):
        return False


def _guard_shape_is(task: Task, args: tuple[str, ...]) -> bool:
    shapes = _feat(task, "loop_guard_shapes", []) or []
    return any(" ".join(a.split()) in shapes for a in args)  # type: ignore[operator]


PREDICATES: Mapping[str, PredicateFn] = {
    "dafny_has_loop": _flag("has_loop"),
    "dafny_uses_sequences": _flag("uses_sequences"),
    "dafny_uses_arrays": _flag("uses_arrays"),
    "dafny_uses_multiset": _flag("uses_multiset"),
    "dafny_uses_quantifiers": _flag("uses_quantifiers"),
    "dafny_has_recursion": _flag("has_recursion"),
    "dafny_method_name_mentions": _name_mentions,
    "dafny_member_kind_is": _member_kind_is,
    "dafny_loops_at_least": _loops_at_least,
    "dafny_loop_guard_shape_is": _guard_shape_is,
}


def _pred(kind: str, *args: str) -> str:
    return f"{kind}({', '.join(json.dumps(a) for a in args)})" if args else f"{kind}()"


def _line_diff(a_minus: str, a_plus: str) -> tuple[list[str], list[str]]:
    """Lines added and removed, counted (a clause added to a second member is a change even when
    the first already has the same line)."""
    minus = Counter(norm(x) for x in a_minus.splitlines() if norm(x))
    plus = Counter(norm(x) for x in a_plus.splitlines() if norm(x))
    return sorted((plus - minus).elements()), sorted((minus - plus).elements())


def contrast_key(a_minus: str, a_plus: str) -> str:
    """ "+<added annotation>; -<removed annotation>" (normalised, sorted)."""
    added, removed = _line_diff(a_minus, a_plus)
    return "; ".join([f"+{x}" for x in added] + [f"-{x}" for x in removed]) or "no change"


def distil_annotation(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation and condition for a verified annotation change on `task`."""
    added, removed = annotation_changes(a_minus, a_plus)
    names = ", ".join((_feat(task, "members", []) or [])[:3])  # type: ignore[index]
    change = "; ".join([f"adding `{' '.join(a.text.split())}`" for a in added[:2]])
    change += "; ".join(
        [f"{'; ' if change else ''}dropping `{' '.join(a.text.split())}`" for a in removed[:2]]
    )
    parts: list[str] = []
    guard = None
    for ann in added + removed:
        above = [lp for lp in loops(a_plus if ann in added else a_minus) if lp.line < ann.line]
        if above and ann.keyword in ("invariant", "decreases"):
            guard = above[-1].guard
            break
    text = " ".join(a.text for a in added + removed)
    if guard is not None:
        parts.append(_pred("dafny_loop_guard_shape_is", shape(guard)))
    elif _feat(task, "has_recursion") and "decreases" in text:
        parts.append(_pred("dafny_has_recursion"))
    elif _feat(task, "has_loop"):
        parts.append(_pred("dafny_has_loop"))
    # a feature the change speaks of, named only where the program has it (``|x|`` is also a
    # string's or a set's size): a condition never contradicts its own source
    if ("|" in text or "[.." in text or "..]" in text) and _feat(task, "uses_sequences"):
        parts.append(_pred("dafny_uses_sequences"))
    if ".Length" in text and _feat(task, "uses_arrays"):
        parts.append(_pred("dafny_uses_arrays"))
    if "multiset" in text and _feat(task, "uses_multiset"):
        parts.append(_pred("dafny_uses_multiset"))
    situation = f"Verifying {names or 'a Dafny program'}: {change or 'changing its annotations'} made more of it verify."
    return Distillation(situation=situation, condition=" AND ".join(parts))
