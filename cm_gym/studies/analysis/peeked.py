"""Decisions with every option checked on a fork: the raw material of `cm-gym diagnose`.

`collect` plays a behaviour policy over a list of tasks; at every decision it first asks the env
for every valid option's executed text and outcome (`MemorySelectionEnv.counterfactuals`, checked
on forks and never charged), then steps with the behaviour policy's choice. Each decision becomes a
`PeekedDecision`: the observation z_t, the skip outcome, and per retrieved slot its outcome,
whether the revision changed the draft, and the slot's features — the seven of the paper's layout
plus two that a deployed selector could compute but the paper's z_t lacks (`applies`: the record's
edit has a site in the draft, `Domain.record_applies`; `shown_before`: the record was already used
at an earlier decision of this episode).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.envs import features as F

#: The per-slot features a `SlotOutcome` carries, in this order (validity is left out: it is 1).
SLOT_FEATURE_NAMES: tuple[str, ...] = (
    *(name for name in F.SLOT_FEATURES if name != "validity"),
    "slot_index",
    "applies",
    "shown_before",
)


@dataclass(frozen=True)
class SlotOutcome:
    """What using one retrieved slot would have done at a decision."""

    slot: int
    record_id: str
    score: float
    solved: bool
    changed: bool
    features: dict[str, float]

    def key(self) -> tuple[float, float]:
        return (float(self.solved), self.score)


@dataclass(frozen=True)
class PeekedDecision:
    """One decision with the outcome of skip and of every valid slot."""

    task_id: str
    decision: int
    obs: np.ndarray
    skip_score: float
    skip_solved: bool
    slots: tuple[SlotOutcome, ...]

    def skip_key(self) -> tuple[float, float]:
        return (float(self.skip_solved), self.skip_score)

    def effect(self, slot: SlotOutcome) -> int:
        """+1 when using `slot` beats skip (solved first, then score), −1 when it is worse, 0 tie."""
        a, b = slot.key(), self.skip_key()
        return (a > b) - (a < b)

    @property
    def skip_unique_best(self) -> bool:
        """Skip strictly beats every valid slot (and at least one slot was offered)."""
        return bool(self.slots) and all(self.effect(s) < 0 for s in self.slots)

    @property
    def some_slot_helps(self) -> bool:
        return any(self.effect(s) > 0 for s in self.slots)

    @property
    def all_tie(self) -> bool:
        return all(self.effect(s) == 0 for s in self.slots)


Behaviour = Callable[[np.ndarray], int]


def _slot_features(obs: np.ndarray, j: int) -> dict[str, float]:
    values = obs[F.slot(j)]
    out = {name: float(v) for name, v in zip(F.SLOT_FEATURES, values, strict=True) if name != "validity"}
    out["slot_index"] = float(j)
    return out


def collect(
    env: Any,
    policy: Any,
    task_ids: Sequence[str],
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[PeekedDecision]:
    """Play `policy` (SB3 ``predict``) once over each task id and peek every option at every
    decision. `env` is a `MemorySelectionEnv` (or a wrapper of one); the store is never written."""
    base = env.unwrapped
    records = {r.record_id: r for r in base.store.records}
    tasks = {t.task_id: t for t in base.tasks}
    out: list[PeekedDecision] = []
    for i, task_id in enumerate(task_ids):
        obs, info = env.reset(seed=seed + i, options={"task_id": task_id})
        blind = dataclasses.replace(tasks[task_id], reference="")
        used: set[str] = set()
        done = False
        while not done:
            options = {c.action: c for c in base.counterfactuals()}
            draft, skip = options[0].text, options[0].outcome
            slots = []
            for j in sorted(a for a in options if a > 0):
                record_id = str(options[j].record_id)
                rec = records[record_id]
                feats = _slot_features(obs, j)
                feats["applies"] = float(base.domain.record_applies(blind, draft, rec.a_minus, rec.a_plus))
                feats["shown_before"] = float(record_id in used)
                c = options[j]
                slots.append(
                    SlotOutcome(
                        j,
                        record_id,
                        float(c.outcome.score),
                        bool(c.outcome.solved),
                        base.domain.action_changed(draft, c.text),
                        feats,
                    )
                )
            out.append(
                PeekedDecision(
                    task_id,
                    int(info.get("decision", 0)),
                    np.asarray(obs, dtype=np.float32).copy(),
                    float(skip.score),
                    bool(skip.solved),
                    tuple(slots),
                )
            )
            action, _ = policy.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(int(np.asarray(action).reshape(-1)[0]))
            if info.get("record_id"):
                used.add(str(info["record_id"]))
            done = terminated or truncated
        if progress is not None:
            progress(1)
    return out
