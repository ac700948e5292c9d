"""`MathDomain`: formal proofs of miniF2F statements with Coq as the world model
(cm_gym/MiniF2F-v0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from cm_gym.core.types import Evaluator, Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, PredicateFn
from cm_gym.domains.math import reply
from cm_gym.domains.math.conditions import PREDICATES, contrast_key, distil_script, transfer
from cm_gym.domains.math.edits import math_edit_operators
from cm_gym.domains.math.errormodel import math_error_model
from cm_gym.domains.math.lines import split_lines
from cm_gym.domains.math.proofs import read_table
from cm_gym.domains.math.script import extract_proof
from cm_gym.domains.reply import ReplyFormat


class MathDomain(Domain):
    """A theorem statement; an action is a proof script (``Require Import`` lines, then tactic
    sentences — one decision unit per line); the world model runs ``coqc`` on statement + script
    in the sandbox and reads ``Qed`` and ``Print Assumptions``."""

    name: ClassVar[str] = "math"
    action_kind: ClassVar[str] = "Coq proof script"
    action_format: ClassVar[str] = (
        "Return only the proof script in one ```coq fenced code block: optional `Require Import` lines "
        "of standard-library modules, then one tactic sentence per line; no Proof./Qed., no admit."
    )
    reply_format: ClassVar[ReplyFormat] = ReplyFormat(
        ("coq", "rocq", "gallina", "v", "ocaml"), reply.find_script, "Coq proof script"
    )

    def make_evaluator(self, **kwargs: Any) -> Evaluator:
        """A `MathEvaluator` (kwargs: tactic_timeout, qed_timeout, limits, sandbox, cache, workers,
        coqc). Raises `ToolNotFoundError` when ``coqc`` is not installed."""
        from cm_gym.domains.math.evaluator import MathEvaluator

        return MathEvaluator(**kwargs)

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        return math_edit_operators(task, action)

    def decision_units(self, action: str) -> list[str]:
        """The script's lines: each header command and each tactic sentence."""
        s = split_lines(action)
        return (s.header + s.body) or super().decision_units(action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return PREDICATES

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return distil_script(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        return contrast_key(a_minus, a_plus)

    def error_model(self) -> ErrorModel:
        return math_error_model(read_table().get("rates", {}).get("wrong_procedure"))

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        return transfer(draft, a_minus, a_plus)

    def parse_action(self, text: str) -> str:
        """The script of the reply (`reply_format`: a ```coq block, any block, a Proof. block or
        script lines in the prose), with a restated theorem reduced to its proof script."""
        return extract_proof(super().parse_action(text))

    def canonical_action(self, text: str) -> str:
        """The comment-free sentences (layout and comments never count)."""
        return reply.canonical(text)
