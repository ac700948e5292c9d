"""`SatDomain`: the SAT plugin's implementation of the `Domain` contract for both task kinds
(``features["kind"]`` = "encoding" for generated problems, "solver" for DIMACS instances)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, PredicateFn
from cm_gym.domains.reply import ReplyFormat
from cm_gym.domains.sat import conditions, edits, errormodel, reply
from cm_gym.domains.sat.evaluator import SatEvaluator


class SatDomain(Domain):
    """SAT: declarative CNF encodings of combinatorial problems, and python-sat solver
    configurations on DIMACS formulas, checked by real solvers under conflict budgets."""

    name = "sat"
    action_kind = "SAT constraint encoding or python-sat solver configuration"
    action_format = (
        "Return only the action in one fenced code block: for an encoding task, constraint lines in "
        "the encoding language shown in the environment; for a solver task, 'key: value' lines "
        "(solver, phase, preprocess, budget)."
    )
    reply_format = ReplyFormat(("sat", "cnf"), reply.find_action, "SAT encoding or configuration")

    def make_evaluator(self, **kwargs: Any) -> SatEvaluator:
        """The SAT world model; kwargs: `conflict_budget`, `encoding_solver`."""
        return SatEvaluator(**kwargs)

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        """One-unit edits: a configuration key for solver tasks, one constraint line otherwise."""
        if task.features.get("kind") == "solver" or edits.is_config(action):
            return edits.config_edits(task.features, action)
        return edits.encoding_edits(action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        """The ``sat_*`` predicate kinds (family, kind, ratio, capacity, allowance, ...)."""
        return conditions.condition_predicates()

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        """Situation and a look-alike-excluding condition (rule-based DISTIL_RECORD)."""
        return conditions.distil(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        """Canonical change: per line (head / index / where / range / drop / add) or per
        configuration key (budget by direction only)."""
        parts = edits.contrast_parts(a_minus, a_plus)
        return "sat " + "; ".join(parts) if parts else "sat no change"

    def edit_kind(self, a_minus: str, a_plus: str) -> str:
        """The unit kinds that changed ("head", "where", "drop", "budget", ...), without the line
        or array, so the same kind of edit elsewhere in a draft is an analogous edit."""
        parts = edits.contrast_parts(a_minus, a_plus)
        return "; ".join(sorted({part.split()[0].rstrip(":") for part in parts if part.split()}))

    def error_model(self) -> ErrorModel:
        """Feature-dependent encoding and solver-configuration slips."""
        return errormodel.error_model()

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """Apply the same kind of edit to `draft` (exact line, or same head and array; a
        configuration key when the draft has a⁻'s value); never reads the reference."""
        return edits.apply_contrast_text(task.meta, draft, a_minus, a_plus)

    def canonical_action(self, text: str) -> str:
        """The set of constraint lines (order, layout and comments never count), or the sorted
        configuration."""
        return reply.canonical(text)
