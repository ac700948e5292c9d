"""The SAT checks' worker side (`cm_gym.domains.isolated`): the evaluator, in-process, in the
worker. Its caches (parsed DIMACS files, compiled encodings) live as long as the worker."""

from __future__ import annotations

from typing import Any

from cm_gym.domains.isolated import check_here, check_many_here
from cm_gym.domains.sat.evaluator import SatEvaluator


def check(config: dict[str, Any], task: dict[str, Any], text: str) -> dict[str, Any]:
    """Check `text` for `task` with an in-process evaluator built from `config`."""
    return check_here(SatEvaluator, config, task, text)


def check_many(config: dict[str, Any], items: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    """`check` for a batch of (task, text) pairs."""
    return check_many_here(SatEvaluator, config, items)
