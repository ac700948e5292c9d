"""CodeHumanEval's simulated slips, ranked repair edits and record transfer.

Error model (a draft is the reference with slips reintroduced; every slip is tied to a feature of
the docstring or the code's shape, as SQL's are to wording):

- ``leave_bug_unfixed`` — the injected bug survives, with a rate per HumanEvalFix class. Where the
  rates come from: OctoPack (Muennighoff et al., 2023, Table 2) reports HumanEvalFix-Python pass@1
  of 30–47% for instruction-tuned models of the paper's era (OctoCoder 30.4, GPT-4 47.0), i.e.
  a miss rate of ~0.5; classes are spread around it by subtlety, in the same order as the code
  domain's model (boundary and missing logic hardest, operator and variable easiest). Not fitted
  to a cached real run.
- ``flip_boundary`` — ``<``↔``<=`` flipped, 0.2 when the docstring uses boundary wording
  (strictly / at most / inclusive …) and the code compares, else 0.05 (the code domain's rates).
- ``off_by_one_bound`` — a ``range``/slice bound ±1, 0.12 with such a bound (the code domain's).
- ``wrong_order`` — a sort's order toggled, 0.2 when the docstring talks about order.
- ``min_max_confusion`` — ``min``↔``max``, 0.15 when the docstring names an extreme.
- ``accumulator_start`` — an accumulator's start value ±1, 0.08 with an accumulator.
The last three are set on the scale of the first two (priors, not fitted).

Edit operators rank single edits of the entry point's body by the same feature priors (a repair
template ranked by the docstring, never by the reference); `transfer_contrast` moves a record's fix
as the same kind of edit to another draft, at the most similar site.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit, ErrorModel, ErrorOperator
from cm_gym.domains.code.edits import Mutation
from cm_gym.domains.code.errormodel import _line_of, _shape
from cm_gym.domains.code.patch import PatchError, apply_patch
from cm_gym.domains.humaneval.families import BOUNDARY_OPS, all_mutations, between, body_span, kind_family

MAX_EDITS = 24
LEAVE_BUG = {
    "boundary": 0.55,
    "off_by_one": 0.5,
    "function_misuse": 0.45,
    "operator": 0.35,
    "value": 0.4,
    "variable": 0.35,
    "missing_logic": 0.6,
}


def _f(task: Task, key: str) -> object:
    return task.features.get(key)


def body_mutations(source: str, function: str) -> list[Mutation]:
    """Single edits of `source` inside `function`'s body (all of `source` if it is not found)."""
    lo, hi = body_span(source, function)
    muts = all_mutations(source)
    return [m for m in muts if lo <= m.start and m.end <= hi] if hi > lo else muts


def _is_bound_site(source: str, m: Mutation) -> bool:
    line = _line_of(source, m)
    return "range(" in line or ":" in line and "[" in line


def _mutator(
    pick: Callable[[str, Mutation], bool],
) -> Callable[[Task, str, np.random.Generator], str | None]:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        cands = [m for m in body_mutations(action, str(_f(task, "function") or "")) if pick(action, m)]
        if not cands:
            return None
        return cands[int(rng.integers(len(cands)))].apply(action)

    return apply


def _boundary(src: str, m: Mutation) -> bool:
    return m.kind == "flip_comparison" and m.old.strip() in BOUNDARY_OPS


def _bound(src: str, m: Mutation) -> bool:
    return m.kind in ("plus_one", "minus_one") and _is_bound_site(src, m)


def _order(src: str, m: Mutation) -> bool:
    return m.kind == "toggle_reverse"


def _min_max(src: str, m: Mutation) -> bool:
    return m.kind == "swap_function" and m.old in ("min", "max")


def _start(src: str, m: Mutation) -> bool:
    return m.kind == "change_value"


def humaneval_error_model() -> ErrorModel:
    """Feature-tied slips (module doc)."""
    boundary_ops = lambda t: bool(set(_f(t, "comparisons") or []) & BOUNDARY_OPS)  # noqa: E731
    ops = (
        ErrorOperator(
            "leave_bug_unfixed",
            lambda t: LEAVE_BUG.get(str(_f(t, "bug_class")), 0.45) if t.meta.get("buggy") else 0.0,
            lambda t, a, r: str(t.meta["buggy"]) if t.meta.get("buggy") else None,
        ),
        ErrorOperator(
            "flip_boundary",
            lambda t: (0.2 if _f(t, "boundary") else 0.05) if boundary_ops(t) else 0.0,
            _mutator(_boundary),
        ),
        ErrorOperator(
            "off_by_one_bound",
            lambda t: 0.12 if _f(t, "range_loop") or _f(t, "slicing") else 0.0,
            _mutator(_bound),
        ),
        ErrorOperator(
            "wrong_order",
            lambda t: 0.2 if _f(t, "sorts") and _f(t, "mentions_order") else 0.0,
            _mutator(_order),
        ),
        ErrorOperator(
            "min_max_confusion",
            lambda t: 0.15 if _f(t, "extreme_calls") and _f(t, "mentions_extreme") else 0.0,
            _mutator(_min_max),
        ),
        ErrorOperator("accumulator_start", lambda t: 0.08 if _f(t, "accumulator") else 0.0, _mutator(_start)),
    )
    return ErrorModel(operators=ops)


def _prior(task: Task, source: str, m: Mutation) -> float:
    """How likely a repair template rates this edit, from docstring wording and code shape."""
    family = kind_family(m)
    if family == "boundary":
        return 3.0 if _f(task, "boundary") else 1.5
    if family == "off_by_one":
        return 2.0 if _is_bound_site(source, m) else 0.6
    if family == "function_misuse":
        cued = _f(task, "mentions_order") if m.kind == "toggle_reverse" else _f(task, "mentions_extreme")
        return 2.5 if cued else 1.0
    if family == "operator":
        return 1.4 if _f(task, "mentions_arith") else 1.0
    return {"value": 0.9, "variable": 0.7, "missing_logic": 0.3}.get(family, 0.5)


def humaneval_edit_operators(task: Task, action: str) -> list[Edit]:
    """Single edits of the entry point's body, most plausible repairs first (deterministic)."""
    try:
        program = apply_patch(str(task.meta.get("buggy", "")), action)
    except PatchError:
        return []
    base = action if program.strip() == action.strip() else program
    muts = body_mutations(base, str(_f(task, "function") or ""))

    def key(m: Mutation) -> tuple[float, str]:
        tie = hashlib.blake2b(f"{m.kind}|{m.start}|{m.new}".encode(), digest_size=6).hexdigest()
        return -_prior(task, base, m), tie

    return [
        Edit(text=m.apply(base), unit=f"line {m.line}", description=m.description)
        for m in sorted(muts, key=key)[:MAX_EDITS]
    ]


def transfer_contrast(draft: str, a_minus: str, a_plus: str) -> str | None:
    """The fix a⁻ → a⁺ as the same kind of single edit on `draft` (None without a site)."""
    learnt = between(a_minus, a_plus)
    if learnt is None:
        return None
    shape, context = _shape(learnt), _line_of(a_minus, learnt)
    best: tuple[float, Mutation] | None = None
    for cand in all_mutations(draft):
        if cand.kind != learnt.kind or _shape(cand) != shape:
            continue
        if learnt.kind in ("change_variable", "swap_function") and (cand.old, cand.new) != (
            learnt.old,
            learnt.new,
        ):
            continue
        score = difflib.SequenceMatcher(a=context, b=_line_of(draft, cand), autojunk=False).ratio()
        if best is None or score > best[0]:
            best = (score, cand)
    return best[1].apply(draft) if best is not None else None
