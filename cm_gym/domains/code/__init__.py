"""Code-repair domain: registers "Code" (``cm_gym/Code-v0``, generated small functions with seeded
bugs, shipped with the package) and "QuixBugs" (``cm_gym/QuixBugs-v0``, real data under
``data_root()/"quixbugs"``). The world model runs each task's tests in `cm_gym.evaluators`'
sandbox; see `evaluator.py` and `cm_gym/evaluators/sandbox.py` for what is isolated."""

from __future__ import annotations

from pathlib import Path

from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.registry import register_benchmark

__all__ = ["CodeDomain", "load_generated_tasks", "load_quixbugs_tasks"]


def load_generated_tasks(limit: int | None = None) -> list[Task]:
    """The generated benchmark (deterministic; ids ``codegen-0000`` …)."""
    from cm_gym.domains.code.generated import load_generated_tasks as load

    return load(limit=limit)


def load_quixbugs_tasks(
    root: Path | str | None = None, limit: int | None = None, report: LoadReport | None = None
) -> list[Task]:
    """QuixBugs' 40 Python programs (default ``data_root()/"quixbugs"``); `report` collects the
    refused programs instead of raising."""
    from cm_gym.domains.code.loader import load_quixbugs_tasks as load

    return load(root=root, limit=limit, report=report)


register_benchmark(
    "Code",
    domain=CodeDomain,
    load_tasks=load_generated_tasks,
    description="generated small Python functions with seeded bugs and look-alikes; tests run in a sandbox",
    split_by_env=True,
    default_n_build=30,  # a bare gym.make builds from 30 of the 69 build tasks (< 2 min here, issue 18)
)
register_benchmark(
    "QuixBugs",
    domain=CodeDomain,
    load_tasks=load_quixbugs_tasks,
    description="QuixBugs' 40 one-line-bug Python programs with their tests (real data)",
    split_by_env=False,
    default_n_build=10,  # 10 of 16 build tasks: the graph programs' pytest runs are slow (issue 18)
    data_layout="QuixBugs layout: python_programs/, correct_python_programs/, python_testcases/, json_testcases/",
)
