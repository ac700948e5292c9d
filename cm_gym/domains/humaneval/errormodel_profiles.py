"""CodeHumanEval error models of the simulator's *fitted profiles* (``llm="simulated:<profile>"``).

The published HumanEval outputs are *synthesis* answers (prompt → program), so a profile drafts
the way such a system fails, not the way a repair leaves an injected bug: the draft is the
canonical program with the system's kinds of mistake, at its fitted rates (in the profile file,
``cm_gym/llm/profiles/``), and the task's injected bug does not survive by itself. Slips:

* ``slip_<family>`` for each HumanEvalFix family (``boundary``, ``off_by_one``,
  ``function_misuse``, ``operator``, ``value``, ``variable``, ``missing_logic``): one single edit
  of that family (`cm_gym.domains.humaneval.families`) in the entry point's body, where the
  canonical body has one;
* ``rewrite`` — two edits of different families on different lines: a program that is wrong in
  more than one place (what the classifier calls ``other``: not one bug);
* ``no_program`` — the entry point with no code (the failing Reflexion rows are empty replies).

HumanEvalFix's ``excess_logic`` has no slip (no generic edit writes a plausible extra clause).
The default's retry and revision rates are kept (the published outputs say nothing about them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.code.edits import Mutation
from cm_gym.domains.humaneval.errormodel import body_mutations, humaneval_error_model
from cm_gym.domains.humaneval.families import FAMILIES, body_span, kind_family

MAX_P = 0.95
OPERATORS: tuple[str, ...] = (*(f"slip_{f}" for f in FAMILIES), "rewrite", "no_program")
#: the class (`cm_gym.studies.analysis.real_errors_humaneval.HE_KINDS`) each slip produces
TARGETS: dict[str, str] = {
    **{f"slip_{f}": f for f in FAMILIES},
    "rewrite": "other",
    "no_program": "no_program",
}


def initial_rates() -> dict[str, float]:
    """Where a fit starts: every slip at 0.05."""
    return dict.fromkeys(OPERATORS, 0.05)


def _function(task: Task) -> str:
    return str(task.features.get("function") or "")


@functools.lru_cache(maxsize=4096)
def _families(reference: str, function: str) -> frozenset[str]:
    """The families with at least one single edit in the canonical body (cached)."""
    return frozenset(kind_family(m) for m in body_mutations(reference, function))


def _of(action: str, function: str, family: str) -> list[Mutation]:
    return [m for m in body_mutations(action, function) if kind_family(m) == family]


def _slip(family: str) -> Callable[[Task, str, np.random.Generator], str | None]:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        cands = _of(action, _function(task), family)
        return cands[int(rng.integers(len(cands)))].apply(action) if cands else None

    return apply


def rewrite(task: Task, action: str, rng: np.random.Generator) -> str | None:
    """Two edits of different families on different lines."""
    muts = body_mutations(action, _function(task))
    if len(muts) < 2:
        return None
    first = muts[int(rng.integers(len(muts)))]
    once = first.apply(action)
    later = [
        m
        for m in body_mutations(once, _function(task))
        if m.line != first.line and kind_family(m) != kind_family(first)
    ]
    return later[int(rng.integers(len(later)))].apply(once) if later else None


def no_program(task: Task, action: str, rng: np.random.Generator) -> str | None:
    """The entry point with no code: its body (after the docstring) replaced by ``pass``."""
    lo, hi = body_span(action, _function(task))
    return action[:lo] + "pass\n" + action[hi:].lstrip("\n") if hi > lo else None


_APPLY = {"rewrite": rewrite, "no_program": no_program}


def profile_error_model(params: Mapping[str, Any]) -> ErrorModel:
    """The `ErrorModel` of a fitted CodeHumanEval profile (``params["rates"]``: slip → rate)."""
    rates = {str(k): float(v) for k, v in (params.get("rates") or {}).items()}
    unknown = sorted(set(rates) - set(OPERATORS))
    if unknown:
        raise ValueError(f"unknown HumanEval slip(s) in the profile: {', '.join(unknown)}")
    base = humaneval_error_model()

    def prob(name: str) -> Callable[[Task], float]:
        rate = rates.get(name, 0.0)
        if name == "no_program":
            return lambda t: min(MAX_P, rate) if rate > 0 else 0.0
        if name == "rewrite":
            return lambda t: (
                min(MAX_P, rate) if rate > 0 and len(_families(t.reference, _function(t))) >= 2 else 0.0
            )
        family = TARGETS[name]
        return lambda t: (
            min(MAX_P, rate) if rate > 0 and family in _families(t.reference, _function(t)) else 0.0
        )

    ops = tuple(
        ErrorOperator(name, prob(name), _APPLY.get(name) or _slip(TARGETS[name])) for name in OPERATORS
    )
    return ErrorModel(operators=ops, fix_prob=base.fix_prob, revision=base.revision)
