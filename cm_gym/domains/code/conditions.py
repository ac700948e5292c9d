"""Code-repair condition predicates, rule-based distillation and contrast keys.

Predicates read only ``Task.features`` computed from the buggy program, the description and the
test names (never the reference). `distil` turns a verified fix a⁻ → a⁺ into a situation and a
condition that is false on look-alike tasks (e.g. a ``<=`` → ``<`` fix learnt on "strictly less
than" does not apply to "at most").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, PredicateFn, token_diff
from cm_gym.domains.code.bugclass import strip_docstrings
from cm_gym.domains.code.edits import Mutation, mutations_between
from cm_gym.domains.code.program import INCLUSIVE_PHRASES, STRICT_PHRASES


def _feat(task: Task, key: str, default: object = None) -> object:
    return task.features.get(key, default) if task.domain == "code" else default


def _bug_class_is(task: Task, args: tuple[str, ...]) -> bool:
    return _feat(task, "bug_class") in args


def _has_loop(task: Task, args: tuple[str, ...]) -> bool:
    if args and args[0] == "while":
        return bool(_feat(task, "has_while", False))
    return bool(_feat(task, "has_loop", False))


def _has_recursion(task: Task, args: tuple[str, ...]) -> bool:
    return bool(_feat(task, "has_recursion", False))


def _signature_has(task: Task, args: tuple[str, ...]) -> bool:
    params = _feat(task, "params", []) or []
    return bool(args) and all(a in params for a in args)  # type: ignore[operator]


def _arity_is(task: Task, args: tuple[str, ...]) -> bool:
    return bool(args) and str(_feat(task, "arity", -1)) == str(args[0])


def _test_names_mention(task: Task, args: tuple[str, ...]) -> bool:
    names = " ".join(_feat(task, "test_names", []) or []).lower()  # type: ignore[arg-type]
    return any(a.lower() in names for a in args)


def _has_comparison(task: Task, args: tuple[str, ...]) -> bool:
    ops = _feat(task, "comparisons", []) or []
    return any(a in ops for a in args)  # type: ignore[operator]


def _boundary_is(task: Task, args: tuple[str, ...]) -> bool:
    return _feat(task, "boundary", "") in args


def _uses_call(task: Task, args: tuple[str, ...]) -> bool:
    calls = _feat(task, "calls", []) or []
    return any(a in calls for a in args)  # type: ignore[operator]


PREDICATES: Mapping[str, PredicateFn] = {
    "code_bug_class_is": _bug_class_is,
    "code_function_has_loop": _has_loop,
    "code_function_has_recursion": _has_recursion,
    "code_signature_has": _signature_has,
    "code_arity_is": _arity_is,
    "code_test_names_mention": _test_names_mention,
    "code_has_comparison": _has_comparison,
    "code_boundary_is": _boundary_is,
    "code_uses_call": _uses_call,
}


def _pred(kind: str, *args: str) -> str:
    return f"{kind}({', '.join(json.dumps(a) for a in args)})" if args else f"{kind}()"


def _phrases_in(text: str, phrases: tuple[str, ...]) -> list[str]:
    low = text.lower()
    return [p for p in phrases if re.search(rf"\b{re.escape(p)}\b", low)]


def _description(task: Task) -> str:
    return task.prompt.split("```", 1)[0]


def fix_of(a_minus: str, a_plus: str) -> tuple[str, Mutation | None]:
    """The kind of the fix a⁻ → a⁺ and its single mutation ("add_code" / "edit" otherwise)."""
    m = mutations_between(a_minus, a_plus)
    if m is not None:
        return m.kind, m
    back = mutations_between(a_plus, a_minus)
    if back is not None and back.kind == "remove_base_case":
        return "add_base_case", None
    if back is not None and back.kind == "add_base_case":
        return "remove_base_case", None
    return "edit", None


def _boundary_condition(task: Task, new_op: str) -> list[str]:
    text = _description(task)
    strict_new = new_op in ("<", ">")
    want, avoid = (STRICT_PHRASES, INCLUSIVE_PHRASES) if strict_new else (INCLUSIVE_PHRASES, ("strictly",))
    found = _phrases_in(text, want)
    parts = []
    if found:
        parts.append(_pred("mentions_any", *found))
        parts.append(_pred("mentions_none", *[p for p in avoid if p not in found]))
    return parts


def distil_fix(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation q and condition c for the verified fix a⁻ → a⁺ on `task` (see module doc)."""
    function = str(_feat(task, "function", "") or "the function")
    kind, m = fix_of(a_minus, a_plus)
    first = _description(task).strip().splitlines()
    what = m.description if m is not None else {"add_base_case": "adding a base case"}.get(kind, "editing it")
    situation = f"Repairing `{function}` ({' '.join(first[:1])[:160]}): {what} fixed the failing tests."
    parts: list[str] = []
    if m is not None and kind in ("flip_comparison", "reverse_comparison"):
        parts += _boundary_condition(task, m.new.strip())
        parts.append(_pred("code_has_comparison", m.old.strip()))
    elif kind in ("plus_one", "minus_one"):
        parts.append(_pred("code_bug_class_is", "off_by_one"))
        if _feat(task, "has_loop"):
            parts.append(_pred("code_function_has_loop"))
    elif kind in ("add_base_case", "remove_base_case"):
        parts.append(_pred("code_function_has_recursion"))
        parts.append(_pred("code_bug_class_is", str(_feat(task, "bug_class", "missing_base_case"))))
    elif kind == "change_variable" and m is not None:
        params = [p for p in (m.old.strip(), m.new.strip()) if p in (_feat(task, "params", []) or [])]  # type: ignore[operator]
        parts.append(
            _pred("code_signature_has", *params) if params else _pred("code_bug_class_is", "wrong_variable")
        )
    else:
        parts.append(_pred("code_bug_class_is", str(_feat(task, "bug_class", "other"))))
    parts.append(_pred("code_arity_is", str(_feat(task, "arity", 0))))
    return Distillation(situation=situation, condition=" AND ".join(p for p in parts if p))


def contrast_key(a_minus: str, a_plus: str) -> str:
    """ "<kind>: <old> -> <new>" for a single known edit, else the token diff of the programs."""
    kind, m = fix_of(a_minus, a_plus)
    if m is not None:
        return f"{kind}: {' '.join(m.old.split())} -> {' '.join(m.new.split())}"
    a, b = strip_docstrings(a_minus), strip_docstrings(a_plus)
    diff = "; ".join(f"{rm or '∅'} -> {ad or '∅'}" for rm, ad in token_diff(a, b))
    return f"{kind}: {diff}" if kind != "edit" else diff
