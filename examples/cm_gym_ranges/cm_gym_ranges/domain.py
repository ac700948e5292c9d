"""The Ranges domain: everything cm_gym needs from a benchmark family, in one small file.

An action is ``range(start, stop)`` or ``range(start, stop, step)`` with integer literals; its
decision units are the three arguments. The world model parses the action (it never ``eval``s
model output), caps the length, runs ``range`` and compares the numbers with the reference's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, ErrorOperator, PredicateFn

MAX_LENGTH = 10_000
_CALL = re.compile(r"\s*range\(\s*(-?\d{1,7})\s*,\s*(-?\d{1,7})\s*(?:,\s*(-?\d{1,7})\s*)?\)\s*")
_INCLUSIVE_END = re.compile(r"\bthrough\b|both included", re.IGNORECASE)
_EXCLUSIVE_END = re.compile(r"not including|\bbefore\b|\bbelow\b|just above", re.IGNORECASE)
_EXCLUSIVE_START = re.compile(r"\bafter\b", re.IGNORECASE)
_EVERY = re.compile(r"\bevery (\d{1,6})(?:st|nd|rd|th)\b", re.IGNORECASE)
UNITS = ("start", "stop", "step")

Call = tuple[int, int, int | None]


def parse_call(text: str) -> Call | None:
    """(start, stop, step or None) of a ``range(...)`` call, or None when it is not one."""
    m = _CALL.fullmatch(text or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), None if m.group(3) is None else int(m.group(3))


def render_call(call: Call) -> str:
    start, stop, step = call
    return f"range({start}, {stop})" if step is None else f"range({start}, {stop}, {step})"


def asked_step(task: Task) -> int | None:
    """The step the question words ("every 3rd integer"), read from the prompt (never the reference)."""
    m = _EVERY.search(task.prompt)
    return int(m.group(1)) if m else None


def _values(call: Call) -> range:
    start, stop, step = call
    return range(start, stop, 1 if step is None else step)


class RangesEvaluator:
    """World model: the numbers the call produces against the reference's. U is 1 for exactly the
    reference's numbers, else 0; the overlap (F1) is the graded score (``details["graded"]``, as
    SQL's result-set overlap), which evidence reports. A graded U would make an off-by-one fix on
    a 20-number range worth Δ ≈ 0.05, under admission's ε (0.05) and τ (0.1): almost nothing
    would enter memory."""

    def check(self, state: AgentState, action: Action) -> Outcome:
        expected, call = parse_call(state.task.reference), parse_call(action.text)
        if expected is None:
            return Outcome(0.0, False, "the task's reference is broken", status="error", reason="reference")
        if call is None:
            return Outcome(
                0.0,
                False,
                "expected range(start, stop[, step]) with integer literals",
                status="error",
                reason="parse",
            )
        if call[2] == 0:
            return Outcome(0.0, False, "range() step must not be zero", status="error", reason="step")
        got = _values(call)
        if len(got) > MAX_LENGTH:
            return Outcome(0.0, False, f"more than {MAX_LENGTH} numbers", status="refused", reason="length")
        want = list(_values(expected))
        if list(got) == want:
            return Outcome(1.0, True, "correct")
        common = len(set(got) & set(want))
        graded = 2 * common / (len(got) + len(want)) if got or want else 0.0
        first = "ok" if got and want and got[0] == want[0] else "wrong"
        last = "ok" if got and want and got[-1] == want[-1] else "wrong"
        feedback = f"{len(got)} numbers, expected {len(want)}; first {first}, last {last}"
        return Outcome(0.0, False, feedback, details={"graded": graded})


def _end_word(task: Task, args: tuple[str, ...]) -> bool:
    """The question's end bound is worded as included ("inclusive") or excluded ("exclusive")."""
    if args[0] == "inclusive":
        return bool(_INCLUSIVE_END.search(task.prompt))
    return bool(_EXCLUSIVE_END.search(task.prompt))


def _start_word(task: Task, args: tuple[str, ...]) -> bool:
    """The question's start bound is worded as included ("inclusive") or excluded ("exclusive")."""
    excluded = bool(_EXCLUSIVE_START.search(task.prompt))
    return excluded if args[0] == "exclusive" else not excluded


def _shift(unit: int, delta: int):  # noqa: ANN202 - an ErrorOperator.apply
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        call = parse_call(action)
        if call is None:
            return None
        parts = list(call)
        parts[unit] = parts[unit] + delta  # type: ignore[operator]
        return render_call(tuple(parts))  # type: ignore[arg-type]

    return apply


def _drop_step(task: Task, action: str, rng: np.random.Generator) -> str | None:
    call = parse_call(action)
    return None if call is None or call[2] is None else render_call((call[0], call[1], None))


def _feature(name: str, value: object, p: float):  # noqa: ANN202 - an ErrorOperator.probability
    return lambda task: p if task.features.get(name) == value else 0.0


class RangesDomain(Domain):
    """Integer ranges as Python ``range()`` calls."""

    name = "ranges"
    action_kind = "Python range() call"
    action_format = "Return only the call, e.g. range(3, 10), in one fenced code block."

    def make_evaluator(self, **kwargs: Any) -> RangesEvaluator:
        return RangesEvaluator()

    def decision_units(self, action: str) -> list[str]:
        call = parse_call(action)
        return (
            [action]
            if call is None
            else [f"{u} = {v}" for u, v in zip(UNITS, call, strict=True) if v is not None]
        )

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        call = parse_call(action)
        if call is None:
            return []
        edits = []
        for unit in (0, 1):
            for delta in (1, -1):
                parts = list(call)
                parts[unit] += delta  # type: ignore[operator]
                edits.append(Edit(render_call(tuple(parts)), UNITS[unit], f"{UNITS[unit]} {delta:+d}"))  # type: ignore[arg-type]
        step = asked_step(task)
        if call[2] is not None:
            edits.append(Edit(render_call((call[0], call[1], None)), "step", "drop the step"))
        elif step is not None:
            edits.append(
                Edit(render_call((call[0], call[1], step)), "step", "the step the question asks for")
            )
        return edits

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return {"ranges_end_word": _end_word, "ranges_start_word": _start_word}

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        before, after = parse_call(a_minus), parse_call(a_plus)
        if before is None or after is None:
            return super().contrast_key(a_minus, a_plus)
        parts = []
        for unit, x, y in zip(UNITS, before, after, strict=True):
            if x == y:
                continue
            if x is not None and y is not None:
                parts.append(f"{unit}:{y - x:+d}")
            else:  # a step added or dropped: the same advice whatever its size
                parts.append(f"{unit}:{'added' if x is None else 'dropped'}")
        return "; ".join(parts) or "same"

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        key = self.contrast_key(a_minus, a_plus)
        descending = "true" if task.features.get("descending") else "false"
        clauses = [f'feature_equals("descending", "{descending}")']
        if key.startswith("stop:"):
            word = "inclusive" if (key == "stop:+1") != (descending == "true") else "exclusive"
            clauses.append(f'ranges_end_word("{word}")')
            situation = (
                f"The question's end bound is {'included' if word == 'inclusive' else 'excluded'}: {key}."
            )
        elif key.startswith("start:"):
            word = "exclusive" if key == "start:+1" else "inclusive"
            clauses.append(f'ranges_start_word("{word}")')
            situation = (
                f"The question's start bound is {'excluded' if word == 'exclusive' else 'included'}: {key}."
            )
        else:
            clauses.append('feature_equals("step", "true")')
            situation = f"The question asks for every k-th number: {key}."
        return Distillation(situation, " AND ".join(clauses))

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """Apply the record's *shift* (stop + 1, drop the step, ...) to the draft's own numbers."""
        before, after, call = parse_call(a_minus), parse_call(a_plus), parse_call(draft)
        if before is None or after is None or call is None:
            return None
        parts = list(call)
        for i, (x, y) in enumerate(zip(before, after, strict=True)):
            if x != y:
                parts[i] = parts[i] + (y - x) if None not in (x, y, parts[i]) else y  # type: ignore[operator]
        if before[2] is None and after[2] is not None:  # "add the step": this question's own step
            parts[2] = asked_step(task) or after[2]
        revised = render_call(tuple(parts))  # type: ignore[arg-type]
        return revised if revised != render_call(call) else None

    def error_model(self) -> ErrorModel:
        return ErrorModel(
            operators=(
                ErrorOperator("exclusive_stop_for_inclusive", _inclusive_ascending, _shift(1, -1)),
                ErrorOperator(
                    "inclusive_start_for_after", _feature("start", "exclusive", 0.5), _shift(0, -1)
                ),
                ErrorOperator("countdown_stop", _inclusive_descending, _shift(1, +1)),
                ErrorOperator("step_forgotten", _feature("step", True, 0.35), _drop_step),
                ErrorOperator("inclusive_stop_for_exclusive", _exclusive_ascending, _shift(1, +1)),
            )
        )


def _inclusive_ascending(task: Task) -> float:
    return 0.55 if task.features.get("end") == "inclusive" and not task.features.get("descending") else 0.0


def _inclusive_descending(task: Task) -> float:
    return 0.6 if task.features.get("descending") and _INCLUSIVE_END.search(task.prompt) else 0.0


def _exclusive_ascending(task: Task) -> float:
    return 0.15 if task.features.get("end") == "exclusive" and not task.features.get("descending") else 0.0
