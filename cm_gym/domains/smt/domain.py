"""`SmtDomain`: the SMT plugin's implementation of the `Domain` contract for both task kinds
(``features["kind"]`` = "encoding" for generated problems, "solver" for SMT-LIB benchmarks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, PredicateFn
from cm_gym.domains.reply import ReplyFormat
from cm_gym.domains.smt import conditions, edits, errormodel, reply
from cm_gym.domains.smt.evaluator import SmtEvaluator


class SmtDomain(Domain):
    """SMT: SMT-LIB v2 scripts for stated problems, and z3 configurations for SMT-LIB benchmarks,
    checked by z3 under a deterministic resource limit with independent model validation."""

    name = "smt"
    action_kind = "SMT-LIB v2 script or z3 solver configuration"
    action_format = (
        "Return only the action in one fenced code block: for an encoding task, an SMT-LIB v2 script "
        "with one command per line; for a solver task, 'key: value' lines (logic, tactic, rlimit)."
    )
    reply_format = ReplyFormat(
        ("smt2", "smt", "smtlib", "smt-lib", "z3", "lisp", "scheme"),
        reply.find_action,
        "SMT-LIB script or configuration",
    )

    def make_evaluator(self, **kwargs: Any) -> SmtEvaluator:
        """The SMT world model; kwargs: `rlimit` (for encoding scripts), `memory_mb`."""
        return SmtEvaluator(**kwargs)

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        """One-unit edits: a configuration key for solver tasks, one script line otherwise."""
        if task.features.get("kind") == "solver" or edits.is_config(action):
            return edits.config_edits(task.features, action)
        return edits.script_edits(action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        """The ``smt_*`` predicate kinds (logic, non-linear, bit-vectors, sorts, distinct, ...)."""
        return conditions.condition_predicates()

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        """Situation and a look-alike-excluding condition (rule-based DISTIL_RECORD)."""
        return conditions.distil(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        """Canonical change per line (cmp / sign / sort / width / wrap / add or drop distinct) or
        per configuration key (rlimit by direction only)."""
        parts = edits.contrast_parts(a_minus, a_plus)
        return "smt " + "; ".join(parts) if parts else "smt no change"

    def edit_kind(self, a_minus: str, a_plus: str) -> str:
        """The unit kinds that changed ("cmp", "sort", "add", "drop", "rlimit", ...), without the
        line, so the same kind of edit elsewhere in a draft is an analogous edit."""
        parts = edits.contrast_parts(a_minus, a_plus)
        return "; ".join(sorted({part.split()[0].rstrip(":") for part in parts if part.split()}))

    def error_model(self) -> ErrorModel:
        """Feature-dependent script and z3-configuration slips."""
        return errormodel.error_model()

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """Apply the same kind of edit to `draft`; never reads the reference."""
        return edits.apply_contrast_text(draft, a_minus, a_plus)

    def canonical_action(self, text: str) -> str:
        """The multiset of normalised commands (order, layout and comments never count), or the
        sorted configuration."""
        return reply.canonical(text)
