"""`CodeDomain`: the code-repair benchmark family behind cm_gym/Code-v0 and cm_gym/QuixBugs-v0."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, PredicateFn
from cm_gym.domains.code import reply
from cm_gym.domains.code.conditions import PREDICATES, contrast_key, distil_fix
from cm_gym.domains.code.errormodel import code_edit_operators, code_error_model, transfer_contrast
from cm_gym.domains.code.evaluator import CodeEvaluator
from cm_gym.domains.reply import ReplyFormat


class CodeDomain(Domain):
    """Programs with one bug plus their tests; an action is the whole corrected program (or a
    unified diff against the buggy one); the world model runs the tests in a sandbox."""

    name: ClassVar[str] = "code"
    action_kind: ClassVar[str] = "Python program (the whole corrected program)"
    action_format: ClassVar[str] = (
        "Return the whole corrected program in one ```python fenced code block "
        "(a unified diff against the given program is also accepted)."
    )
    reply_format: ClassVar[ReplyFormat] = ReplyFormat(
        ("python", "py", "python3", "diff", "patch"), reply.find_action, "Python program"
    )

    def make_evaluator(self, **kwargs: Any) -> CodeEvaluator:
        """A `CodeEvaluator` (kwargs: sandbox, limits, per_test_timeout, isolation)."""
        return CodeEvaluator(**kwargs)

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        return code_edit_operators(task, action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return PREDICATES

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return distil_fix(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        return contrast_key(a_minus, a_plus)

    def error_model(self) -> ErrorModel:
        return code_error_model()

    #: moves a record's fix onto another draft as the same kind of edit (None: no site); a
    #: subclass with edit families of its own (`HumanEvalDomain`) swaps in its own
    _transfer: ClassVar[Callable[[str, str, str], str | None]] = staticmethod(transfer_contrast)

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """The record's fix as the same kind of edit on `draft`, else the token-level default."""
        moved = self._transfer(draft, a_minus, a_plus)
        if moved is not None and moved != draft:
            return moved
        return super().apply_contrast(task, draft, a_minus, a_plus)

    def canonical_action(self, text: str) -> str:
        """The program's AST (comments and formatting never count)."""
        return reply.canonical(text)
