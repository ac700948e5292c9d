"""Fixtures: the generated SQL benchmark (shipped with the package), a small split of it, and the
context mechanisms build and decide with (simulated LLM, real SQLite evaluator)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cm_gym.core.splits import make_split
from cm_gym.core.types import Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.factory import make_llm
from cm_gym.studies.mechanisms import MechanismContext


@pytest.fixture(scope="session")
def sql_tasks() -> dict[str, Task]:
    return {t.task_id: t for t in get_benchmark("SQL").load_tasks()}


@pytest.fixture(scope="session")
def sql_split(sql_tasks: dict[str, Task]) -> tuple[list[Task], list[Task]]:
    """(40 build tasks, 30 held-out tasks) of the default split."""
    split = make_split(list(sql_tasks.values()), seed=12345)
    return [sql_tasks[i] for i in split.build[:40]], [sql_tasks[i] for i in split.eval[:30]]


@pytest.fixture(scope="session")
def make_ctx(sql_tasks: dict[str, Task]) -> Callable[..., MechanismContext]:
    domain = get_domain("sql")

    def factory(agent: str = "react", seed: int = 0) -> MechanismContext:
        return MechanismContext(
            domain,
            make_llm("simulated", seed=seed, task_lookup=sql_tasks),
            domain.make_evaluator(),
            agent_kind=agent,
            sampler=lambda i: make_llm("simulated", seed=seed + 1000 * i, task_lookup=sql_tasks),
        )

    return factory
