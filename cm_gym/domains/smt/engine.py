"""The SMT checks' worker side (`cm_gym.domains.isolated`): the evaluator, in-process, in the
worker, with z3's own memory ceiling set once for the process."""

from __future__ import annotations

from typing import Any

from cm_gym.domains.isolated import outcome_to_plain
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.types import Task

_EVALUATORS: dict[tuple[tuple[str, Any], ...], SmtEvaluator] = {}


def check(config: dict[str, Any], task: dict[str, Any], text: str) -> dict[str, Any]:
    """Check `text` for `task` with an in-process evaluator built from `config`."""
    key = tuple(sorted(config.items()))
    evaluator = _EVALUATORS.get(key)
    if evaluator is None:
        evaluator = _EVALUATORS[key] = SmtEvaluator(**config, isolated=False)
    return outcome_to_plain(evaluator.check_here(Task(**task), text))
