"""Formal-verification domain: registers "Dafny" (``cm_gym/Dafny-v0``) on DafnyBench's subset that
verifies with Debian's Dafny 2.3 (``data_root()/"dafny"``). Registration and task loading work
without the verifier; creating an evaluator raises `ToolNotFoundError` with the install command
(``apt-get install -y dafny``) when it is missing."""

from __future__ import annotations

from pathlib import Path

from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.registry import register_benchmark

__all__ = ["DafnyDomain", "load_dafny_tasks"]


def load_dafny_tasks(
    root: Path | str | None = None, limit: int | None = None, report: LoadReport | None = None
) -> list[Task]:
    """DafnyBench tasks (hints removed; reference = ground truth), sorted by file name; `report`
    collects refused files and dropped pairs instead of raising."""
    from cm_gym.domains.dafny.loader import load_dafny_tasks as load

    return load(root=root, limit=limit, report=report)


register_benchmark(
    "Dafny",
    domain=DafnyDomain,
    load_tasks=load_dafny_tasks,
    description="DafnyBench programs with hints removed; add invariants/asserts/decreases until Dafny 2.3 verifies",
    split_by_env=True,
    # a bare gym.make builds its default store on 6 of the 176 build tasks: 84 s on a fresh cache
    # here at load average 21 on 2 cores (`python bench/bench_dafny_slips.py --first-make`; 8 tasks
    # took 99-121 s at load 12-25); `cm-gym build --benchmark Dafny` builds on the whole split
    default_n_build=6,
    data_layout="DafnyBench layout: ground_truth/*.dfy and the matching hints_removed/*.dfy",
)
