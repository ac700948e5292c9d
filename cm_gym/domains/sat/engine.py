"""The SAT checks' worker side (`cm_gym.domains.isolated`): the evaluator, in-process, in the
worker. Its caches (parsed DIMACS files, compiled encodings) live as long as the worker."""

from __future__ import annotations

from typing import Any

from cm_gym.domains.isolated import outcome_to_plain
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.types import Task

_EVALUATORS: dict[tuple[tuple[str, Any], ...], SatEvaluator] = {}


def check(config: dict[str, Any], task: dict[str, Any], text: str) -> dict[str, Any]:
    """Check `text` for `task` with an in-process evaluator built from `config`."""
    key = tuple(sorted(config.items()))
    evaluator = _EVALUATORS.get(key)
    if evaluator is None:
        evaluator = _EVALUATORS[key] = SatEvaluator(**config, isolated=False)
    return outcome_to_plain(evaluator.check_here(Task(**task), text))
