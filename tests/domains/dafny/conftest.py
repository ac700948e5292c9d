"""Dafny test fixtures: the tasks (real data) and an evaluator (needs the verifier: skipped with a
clear reason outside CI, a failure in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.dafny.evaluator import DafnyEvaluator
from cm_gym.domains.dafny.loader import load_dafny_tasks
from cm_gym.evaluators.sandbox import ToolNotFoundError


@pytest.fixture(scope="session")
def dafny_tasks(shared_data: Path) -> list[Task]:
    return load_dafny_tasks(shared_data / "dafny")


@pytest.fixture(scope="session")
def dafny_evaluator() -> DafnyEvaluator:
    try:
        return DafnyEvaluator()
    except ToolNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"dafny is missing in CI: {exc}")
        pytest.skip(f"dafny is not installed: {exc}")


def by_file(tasks: list[Task], fragment: str) -> Task:
    return next(t for t in tasks if fragment in t.meta["file"])
