"""`DafnyDomain`: formal verification of DafnyBench programs (cm_gym/Dafny-v0)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, PredicateFn
from cm_gym.domains.dafny import reply
from cm_gym.domains.dafny.annotations import KEYWORDS
from cm_gym.domains.dafny.conditions import PREDICATES, contrast_key, distil_annotation
from cm_gym.domains.dafny.edits import dafny_edit_operators, transfer_annotations
from cm_gym.domains.dafny.errormodel import dafny_error_model
from cm_gym.domains.dafny.evaluator import DafnyEvaluator
from cm_gym.domains.reply import ReplyFormat

_UNIT = re.compile(rf"^\s*({'|'.join(KEYWORDS)})\b")


class DafnyDomain(Domain):
    """A DafnyBench program with its hints removed; an action is the whole program with proof
    annotations added (one annotation = one decision unit); the world model is Dafny 2.3."""

    name: ClassVar[str] = "dafny"
    action_kind: ClassVar[str] = "Dafny program (the whole program with annotations added)"
    action_format: ClassVar[str] = (
        "Return the whole program in one ```dafny fenced code block, with each added invariant, "
        "assert or decreases clause on its own line; change nothing else."
    )
    reply_format: ClassVar[ReplyFormat] = ReplyFormat(("dafny", "dfy"), reply.find_program, "Dafny program")

    def make_evaluator(self, **kwargs: Any) -> DafnyEvaluator:
        """A `DafnyEvaluator` (kwargs: rlimit, time_limit, limits, sandbox, verifier, cpu_s). Raises
        `ToolNotFoundError` when `dafny` is not installed."""
        return DafnyEvaluator(**kwargs)

    def recording_key(self, task: Task) -> str | None:
        """A DafnyBench task's key among published model outputs: its hint-free file name."""
        name = task.meta.get("file")
        return str(name) if name else None

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        return dafny_edit_operators(task, action)

    def decision_units(self, action: str) -> list[str]:
        """The annotation lines of the action (each one decision unit)."""
        units = [line.strip() for line in action.splitlines() if _UNIT.match(line)]
        return units or super().decision_units(action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return PREDICATES

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return distil_annotation(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        return contrast_key(a_minus, a_plus)

    def edit_kind(self, a_minus: str, a_plus: str) -> str:
        """Which annotation keywords were added or removed ("+invariant", "-assert"), not where."""
        parts = [p for p in contrast_key(a_minus, a_plus).split("; ") if p[:1] in "+-" and p[1:].split()]
        return "; ".join(sorted({p[0] + p[1:].split()[0] for p in parts})) or "no change"

    def error_model(self) -> ErrorModel:
        return dafny_error_model()

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """The record's annotation change moved onto `draft` (same loop-guard shape), or None."""
        return transfer_annotations(str(task.meta.get("program", "")), draft, a_minus, a_plus)

    def canonical_action(self, text: str) -> str:
        """Dafny's token stream (comments and layout never count)."""
        return reply.canonical(text)
