"""The Dafny domain's simulated-LLM error model: the slip families of `slips.py` (rates
`SLIP_RATES`, sources in its module doc) plus the generic drops and off-by-ones of the model they
refine, acting on the annotations the edit grammar (`edits.py`) reads."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.dafny.annotations import remove_annotation, replace_annotation
from cm_gym.domains.dafny.edits import _CMP, _flips, annotations_of
from cm_gym.domains.dafny.slips import (
    SLIP_RATES,
    drop_slice_invariant,
    hard_termination,
    slice_spec,
    strict_index_loop,
    weak_bound,
)


def _dropper(keyword: str) -> Callable[[Task, str, np.random.Generator], str | None]:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        anns = [a for a in annotations_of(task, action) or [] if a.keyword == keyword]
        if not anns:
            return None
        return remove_annotation(action, anns[int(rng.integers(len(anns)))])

    return apply


def _off_by_one(task: Task, action: str, rng: np.random.Generator) -> str | None:
    anns = [a for a in annotations_of(task, action) or [] if a.keyword == "invariant" and _CMP.search(a.text)]
    if not anns:
        return None
    ann = anns[int(rng.integers(len(anns)))]
    alts = _flips(ann.text)
    return replace_annotation(action, ann, alts[int(rng.integers(len(alts)))])


def _no_hints(task: Task, action: str, rng: np.random.Generator) -> str | None:
    program = task.meta.get("program")
    return str(program) if program else None


def _f(task: Task, key: str, default: object = 0) -> object:
    return task.features.get(key, default)


def dafny_error_model() -> ErrorModel:
    """Feature-dependent hint slips: the families of `slips` (rates `SLIP_RATES`, sources in its
    module doc) plus the generic drops and off-by-ones of the model they refine."""
    rates = SLIP_RATES
    loopy = lambda t: 0.03 * min(3, int(_f(t, "n_loops", 0)))  # noqa: E731
    ops = (
        ErrorOperator("no_hints", lambda t: 0.05, _no_hints),
        ErrorOperator("weak_bound", lambda t: rates["weak_bound"] if strict_index_loop(t) else 0.0, weak_bound),
        ErrorOperator("drop_slice_invariant", lambda t: rates["drop_slice_invariant"] if slice_spec(t) else 0.0,
                      drop_slice_invariant),
        ErrorOperator("drop_decreases", lambda t: rates["drop_decreases_hard"] if hard_termination(t)
                      else rates["drop_decreases_easy"] if _f(t, "has_loop", False) else 0.0, _dropper("decreases")),
        ErrorOperator("drop_invariant", lambda t: 0.05 + loopy(t) if _f(t, "has_loop", False) else 0.0,
                      _dropper("invariant")),
        ErrorOperator("drop_assertion", lambda t: 0.1 if _f(t, "uses_quantifiers", False) else 0.05,
                      _dropper("assert")),
        ErrorOperator("off_by_one_invariant", lambda t: 0.05 if _f(t, "has_loop", False) else 0.0, _off_by_one),
    )  # fmt: skip
    return ErrorModel(operators=ops, fix_prob={"react": 0.25, "reflexion": 0.4})
