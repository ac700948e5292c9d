"""cm-gym-ranges: an example cm_gym benchmark plugin (see README.md).

The ``cm_gym.benchmarks`` entry point names `register`; cm_gym calls it once when it loads its
plugins, which registers the Gymnasium id ``cm_gym_ranges/Ranges-v0``.
"""

from __future__ import annotations

from cm_gym_ranges.domain import RangesDomain
from cm_gym_ranges.tasks import load_tasks

__all__ = ["RangesDomain", "load_tasks", "register"]


def register() -> None:
    """Register the "Ranges" benchmark (called once by cm_gym's plugin loader)."""
    from cm_gym.domains.registry import register_benchmark

    register_benchmark(
        "Ranges",
        domain=RangesDomain,
        load_tasks=load_tasks,
        namespace="cm_gym_ranges",
        description="example plugin: integer ranges as Python range() calls (inclusive/exclusive look-alikes)",
    )
