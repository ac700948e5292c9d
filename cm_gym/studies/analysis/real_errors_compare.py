"""Real-vs-simulated comparisons over the domain collectors (`real_errors_spider`, `…_dafny`,
`…_humaneval`), which build on the shared sample types and distances of `real_errors`; apart from
`real_errors` because the collectors import it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from cm_gym.studies.analysis.real_errors import BENCHMARKS, distance

logger = logging.getLogger(__name__)


def compare(
    kind: str,
    system: str,
    profiles: Sequence[str | None] = (None,),
    *,
    seeds: Sequence[int] = (0,),
    repair: bool = True,
    limit: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """One (benchmark kind, real system) comparison: the real sample, one simulated sample per
    profile (None / "default": the built-in model) and each one's `Distance` from the real one.
    `limit` caps the tasks (a quick sample, e.g. in tests); `options` go to the domain collector."""
    col = collectors(kind)
    tasks = col["tasks"](limit)
    real = col["real"](system, tasks, repair=repair, **options)
    out: dict[str, Any] = {"kind": kind, "system": system, "real": real, "simulated": {}, "distance": {}}
    for profile in profiles:
        name = profile or "default"
        sim = col["simulated"](profile, tasks, seeds=seeds, repair=repair, **options)
        out["simulated"][name] = sim
        out["distance"][name] = distance(real, sim)
        logger.info("%s %s vs simulated:%s: %s", kind, system, name, out["distance"][name])
    return out


def collectors(kind: str) -> dict[str, Callable[..., Any]]:
    """The domain module's ``tasks(limit)``, ``real_sample(system, tasks, …)`` and
    ``simulated_sample(profile, tasks, …)`` for recordings kind `kind`."""
    if kind == "spider":
        from cm_gym.studies.analysis import real_errors_spider as mod
    elif kind == "humaneval":
        from cm_gym.studies.analysis import real_errors_humaneval as mod  # type: ignore[no-redef]
    elif kind == "dafny":
        from cm_gym.studies.analysis import real_errors_dafny as mod  # type: ignore[no-redef]
    else:
        raise ValueError(f"unknown recordings kind {kind!r}; use one of {', '.join(BENCHMARKS)}")
    return {"tasks": mod.tasks, "real": mod.real_sample, "simulated": mod.simulated_sample}
