"""`HumanEvalDomain`: the code-repair world model (sandbox + judge) on HumanEval problems, with
feature-tied slips (`model.py`) and conditions that read the docstring and the code's shape.

A record's condition names the docstring wording that made its fix right (``mentions_any`` of
the cue words found, ``mentions_none`` of the opposite ones) and the code shape it needs
(``he_calls("max")``, ``he_has_comparison("<=")``, ``he_shape("range_loop")``), so a ``<=`` → ``<``
fix learnt under "strictly less than" is not offered on an "at most" problem with the same code.
"""

from __future__ import annotations

import builtins
import json
import keyword
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, Edit, ErrorModel, PredicateFn, token_diff
from cm_gym.domains.code.bugclass import strip_docstrings
from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.code.errormodel import _line_of
from cm_gym.domains.code.program import INCLUSIVE_PHRASES, STRICT_PHRASES
from cm_gym.domains.humaneval.errormodel import (
    humaneval_edit_operators,
    humaneval_error_model,
    transfer_contrast,
)
from cm_gym.domains.humaneval.families import CUES, between

_MAX_WORDS = ("largest", "maximum", "biggest", "highest", "max", "greatest")
_MIN_WORDS = ("smallest", "minimum", "lowest", "min", "least")
_DESC_WORDS = ("descending", "decreasing", "reverse", "reversed", "largest first")
_OP_WORDS = {
    "+": ("sum", "add", "plus", "total"), "-": ("difference", "subtract", "minus"),
    "*": ("product", "multiply", "times"), "//": ("quotient", "integer division", "floor"),
    "%": ("remainder", "modulo", "divisible", "even", "odd"), "/": ("average", "mean", "divide"),
}  # fmt: skip


def _feat(task: Task, key: str) -> Any:
    return task.features.get(key) if task.domain == "humaneval" else None


def _shape(task: Task, args: tuple[str, ...]) -> bool:
    return bool(args) and all(bool(_feat(task, a)) for a in args)


def _calls(task: Task, args: tuple[str, ...]) -> bool:
    return any(a in (_feat(task, "call_names") or []) for a in args)


def _has_comparison(task: Task, args: tuple[str, ...]) -> bool:
    return any(a in (_feat(task, "comparisons") or []) for a in args)


def _uses_op(task: Task, args: tuple[str, ...]) -> bool:
    return any(a in (_feat(task, "ops") or []) for a in args)


def _names(task: Task, args: tuple[str, ...]) -> bool:
    return bool(args) and all(a in (_feat(task, "names") or []) for a in args)


PREDICATES: Mapping[str, PredicateFn] = {
    "he_shape": _shape,
    "he_calls": _calls,
    "he_has_comparison": _has_comparison,
    "he_uses_op": _uses_op,
    "he_names": _names,
}


_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = set(keyword.kwlist) | set(dir(builtins))


def _site_names(task: Task, text: str, limit: int = 2) -> list[str]:
    """Identifiers of the edited expression that the shown program uses (the site's shape)."""
    names = set(_feat(task, "names") or [])
    found = [n for n in dict.fromkeys(_IDENT.findall(text)) if n in names and n not in _KEYWORDS]
    return found[:limit]


def _pred(kind: str, *args: str) -> str:
    return f"{kind}({', '.join(json.dumps(a) for a in args)})"


def _found(doc: str, words: tuple[str, ...]) -> list[str]:
    low = doc.lower()
    return [w for w in words if re.search(rf"\b{re.escape(w)}\b", low)]


def _wording(doc: str, want: tuple[str, ...], avoid: tuple[str, ...]) -> list[str]:
    """``mentions_any`` of the wanted cue words found and ``mentions_none`` of the opposite ones."""
    found = _found(doc, want)
    if not found:
        return []
    parts = [_pred("mentions_any", *found)]
    absent = [w for w in avoid if w not in found and not _found(doc, (w,))]
    if absent:
        parts.append(_pred("mentions_none", *absent))
    return parts


def distil_fix(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation and condition of the verified fix a⁻ → a⁺ (see module doc)."""
    fn = str(_feat(task, "function") or "the function")
    doc = str(_feat(task, "docstring") or "")
    m = between(a_minus, a_plus)
    what = m.description if m is not None else "an edit"
    situation = f"Repairing `{fn}` ({' '.join(doc.split())[:160]}): {what} fixed the failing tests."
    parts: list[str] = []
    if m is None:
        parts.append(
            _pred("he_shape", *[k for k in ("range_loop", "accumulator") if _feat(task, k)] or ["bool_ops"])
        )
        return Distillation(situation=situation, condition=" AND ".join(parts))
    old, new = m.old.strip(), m.new.strip()
    if m.kind in ("flip_comparison", "reverse_comparison") and new in ("<", ">", "<=", ">="):
        strict = new in ("<", ">")
        parts += _wording(
            doc, *((STRICT_PHRASES, INCLUSIVE_PHRASES) if strict else (INCLUSIVE_PHRASES, STRICT_PHRASES))
        )
        parts.append(_pred("he_has_comparison", old, new))
        if not parts[:-1]:  # no boundary wording: the site's names say where the fix belongs
            site = _site_names(task, _line_of(a_minus, m))
            if site:
                parts.append(_pred("he_names", *site))
    elif m.kind in ("plus_one", "minus_one"):
        line = _line_of(a_minus, m)
        parts.append(
            _pred(
                "he_shape", "range_loop" if "range(" in line else "slicing" if ":" in line else "accumulator"
            )
        )
        parts += _wording(doc, STRICT_PHRASES + INCLUSIVE_PHRASES, ())
        site = _site_names(task, m.old)
        if site:
            parts.append(_pred("he_names", *site))
    elif m.kind == "swap_function" and {old, new} == {"min", "max"}:
        want, avoid = (_MAX_WORDS, _MIN_WORDS) if new == "max" else (_MIN_WORDS, _MAX_WORDS)
        parts += _wording(doc, want, avoid)
        parts.append(_pred("he_calls", old, new))
    elif m.kind == "swap_function":
        parts += _wording(doc, CUES["case"] + CUES["extreme"], ())
        parts.append(_pred("he_calls", old, new))
    elif m.kind == "toggle_reverse":
        descending = "True" in new
        parts += _wording(doc, _DESC_WORDS, ()) if descending else []
        if not descending:
            absent = [w for w in _DESC_WORDS if not _found(doc, (w,))]
            parts.append(_pred("mentions_none", *absent))
        parts.append(_pred("he_shape", "sorts"))
    elif m.kind == "change_operator" and new in _OP_WORDS:
        cued = _wording(doc, _OP_WORDS[new], _OP_WORDS.get(old, ()))
        parts += cued
        parts.append(_pred("he_uses_op", old, new))
        site = [] if cued else _site_names(task, _line_of(a_minus, m))
        if site:
            parts.append(_pred("he_names", *site))
    elif m.kind == "change_variable":
        parts.append(_pred("he_names", old, new))
    else:  # no wording cue: the edited line's names (and comparison) place the fix
        if m.kind == "flip_comparison":
            parts.append(_pred("he_has_comparison", old, new))
        if m.kind == "change_value":
            parts.append(_pred("he_shape", "accumulator"))
        site = _site_names(task, _line_of(a_minus, m), limit=3)
        parts.append(_pred("he_names", *site) if site else _pred("he_shape", "bool_ops"))
    return Distillation(situation=situation, condition=" AND ".join(p for p in parts if p))


def contrast_key(a_minus: str, a_plus: str) -> str:
    """ "<kind>: <old> -> <new>" for a single known edit, else the token diff."""
    m = between(a_minus, a_plus)
    if m is not None:
        return f"{m.kind}: {' '.join(m.old.split()) or '∅'} -> {' '.join(m.new.split()) or '∅'}"
    diff = token_diff(strip_docstrings(a_minus), strip_docstrings(a_plus))
    return "; ".join(f"{rm or '∅'} -> {ad or '∅'}" for rm, ad in diff)


class HumanEvalDomain(CodeDomain):
    """HumanEval problems with one injected bug; the action is the whole corrected program; the
    world model runs the problem's own tests (converted to cases) in the sandbox, judged outside."""

    name: ClassVar[str] = "humaneval"
    #: `apply_contrast` (CodeDomain's) moves a fix by HumanEval's edit families, else by tokens
    _transfer: ClassVar[Callable[[str, str, str], str | None]] = staticmethod(transfer_contrast)

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        return humaneval_edit_operators(task, action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return PREDICATES

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return distil_fix(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        return contrast_key(a_minus, a_plus)

    def error_model(self) -> ErrorModel:
        return humaneval_error_model()
