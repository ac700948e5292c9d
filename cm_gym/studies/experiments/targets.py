"""Transfer targets (paper Fig. 3, Table 5, D.4): which held-out tasks stand in which relation to
the tasks a store was built from. Generic — it reads only task fields, the store's records and
their conditions — so it works for any registered domain:

* the *source* of a target t is the record-producing source task most similar to t
  (cos(φ(prompt t), φ(prompt s)), the retrieval embedding);
* **look-alike**: t has its source's family and at least one of that source's records has a
  condition that does not hold on t (the correction looks applicable, its requirement fails);
* **new surface** (same error, new surface): not look-alike, t's environment is a source
  environment, t's family produced records, and t is worded unlike its source (similarity below
  the median of such targets);
* **same environment**: the other targets in a source environment;
* **new environment**: targets in an environment no source task ran in.

The generated look-alike tasks the paper's LOOK_ALIKE_TASK template would write need a reference
answer to be checked, so look-alikes are *found* among held-out tasks instead (the generated
benchmarks are built with look-alike pairs).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition_or_none
from cm_gym.domains.registry import get_domain
from cm_gym.memory.embedding import Embedder

CONDITIONS = ("same_env", "new_env", "new_surface", "look_alike")
LABELS = {
    "same_env": "Same environment, new task",
    "new_env": "New environment, new task",
    "new_surface": "Same error, new surface",
    "look_alike": "Look-alike, changed condition",
}


@dataclass(frozen=True)
class Targets:
    """Target ids per condition (capped) and each target's source task."""

    by_condition: dict[str, list[str]]
    source_of: dict[str, str]

    def all_ids(self) -> list[str]:
        return sorted({t for ids in self.by_condition.values() for t in ids})


def classify(
    records: Sequence[object],
    sources: Sequence[Task],
    candidates: Sequence[Task],
    source_envs: Collection[str],
    *,
    cap: int | None = None,
    seed: int = 0,
) -> Targets:
    """Classify `candidates` against the `records` built from `sources` (see the module doc)."""
    if not candidates:
        return Targets({c: [] for c in CONDITIONS}, {})
    domain = get_domain(candidates[0].domain)
    predicates = domain.condition_predicates()
    by_source: dict[str, list[object]] = {}
    for r in records:
        by_source.setdefault(r.source_task_id, []).append(r)  # type: ignore[attr-defined]
    producing = [s for s in sources if s.task_id in by_source]
    families = {s.family for s in producing}
    out: dict[str, list[str]] = {c: [] for c in CONDITIONS}
    source_of: dict[str, str] = {}
    if not producing:
        out["new_env"] = [t.task_id for t in candidates if t.env_id not in source_envs]
        out["same_env"] = [t.task_id for t in candidates if t.env_id in source_envs]
        return Targets({c: _cap(v, cap, seed) for c, v in out.items()}, source_of)
    embedder = Embedder()
    sims = embedder.embed([t.prompt for t in candidates]) @ embedder.embed([s.prompt for s in producing]).T
    nearest = sims.argmax(axis=1)
    surface: list[tuple[str, float]] = []
    for i, t in enumerate(candidates):
        s = producing[int(nearest[i])]
        source_of[t.task_id] = s.task_id
        fails = [
            not c.is_empty and not c.holds(t)
            for c in (parse_condition_or_none(r.condition, predicates) for r in by_source[s.task_id])  # type: ignore[attr-defined]
        ]
        if t.family == s.family and any(fails):
            out["look_alike"].append(t.task_id)
        elif t.env_id not in source_envs:
            out["new_env"].append(t.task_id)
        elif t.family in families:
            surface.append((t.task_id, float(sims[i, nearest[i]])))
        else:
            out["same_env"].append(t.task_id)
    if surface:
        median = float(np.median([v for _, v in surface]))
        out["new_surface"] = [t for t, v in surface if v < median]
        out["same_env"] += [t for t, v in surface if v >= median]
    return Targets({c: _cap(sorted(v), cap, seed) for c, v in out.items()}, source_of)


def _cap(ids: list[str], cap: int | None, seed: int) -> list[str]:
    if cap is None or len(ids) <= cap:
        return ids
    pick = np.random.default_rng(seed).permutation(len(ids))[:cap]
    return sorted(ids[int(i)] for i in pick)


def split_envs(envs: Sequence[str], seed: int) -> set[str]:
    """A seeded half (at least one) of the environments, as the transfer study's source side."""
    order = sorted(set(envs))
    if len(order) <= 1:
        return set(order)
    pick = np.random.default_rng(seed).permutation(len(order))[: max(1, len(order) // 2)]
    return {order[int(i)] for i in pick}
