"""The SMT checks' worker side (`cm_gym.domains.isolated`): the evaluator, in-process, in the
worker, with z3's own memory ceiling set once for the process."""

from __future__ import annotations

from typing import Any

from cm_gym.domains.isolated import check_here, check_many_here
from cm_gym.domains.smt.evaluator import SmtEvaluator


def check(config: dict[str, Any], task: dict[str, Any], text: str) -> dict[str, Any]:
    """Check `text` for `task` with an in-process evaluator built from `config`."""
    return check_here(SmtEvaluator, config, task, text)


def check_many(config: dict[str, Any], items: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    """`check` for a batch of (task, text) pairs."""
    return check_many_here(SmtEvaluator, config, items)
