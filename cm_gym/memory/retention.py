"""Retention at capacity B (paper Eq. 5, D.3) and the reuse update (Eq. 6).

When admitting a record would exceed B, one of four policies picks who leaves (the candidate itself
may be the one; then it is not stored):

* ``utility`` — lowest S_keep = α·Δ̃ + β·ũ + ω·F − η·R, (α, β, ω, η) = (1.0, 1.0, 0.5, 0.7), with
  Δ̃ = clip(Δ, 0, 1), ũ = clip(u, −1, 1), F = uses / max uses in the pool (0 when nothing was
  used) and R the same-key redundancy of admission (`cm_gym.memory.admission`) within the pool.
* ``recent`` — the oldest record (lowest creation order).
* ``random`` — uniformly at random (seeded).
* ``similarity`` — the record most similar to another one (highest max cosine between situations),
  so the pool stays diverse.

Ties go to the oldest record. Several removals are taken one at a time, re-scoring in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cm_gym.memory.admission import normalised_delta, normalised_u, pair_redundancy
from cm_gym.memory.record import Record

RETENTION_POLICIES = ("utility", "recent", "random", "similarity")


@dataclass(frozen=True)
class RetentionWeights:
    """(α, β, ω, η) of Eq. 5; paper defaults (1.0, 1.0, 0.5, 0.7)."""

    alpha: float = 1.0
    beta: float = 1.0
    omega: float = 0.5
    eta: float = 0.7


def keep_scores(
    records: Sequence[Record], embeddings: np.ndarray, weights: RetentionWeights | None = None
) -> np.ndarray:
    """S_keep of every record in the pool (Eq. 5)."""
    w = weights or RetentionWeights()
    max_uses = max((r.uses for r in records), default=0)
    groups: dict[str, list[int]] = {}
    for i, rec in enumerate(records):
        groups.setdefault(rec.contrast_key, []).append(i)
    scores = np.empty(len(records), dtype=np.float64)
    for i, rec in enumerate(records):
        red = sum(
            pair_redundancy(rec, embeddings[i], records[j], embeddings[j])
            for j in groups[rec.contrast_key]
            if j != i
        )
        freq = rec.uses / max_uses if max_uses else 0.0
        scores[i] = (
            w.alpha * normalised_delta(rec.delta)
            + w.beta * normalised_u(rec.u)
            + w.omega * freq
            - w.eta * red
        )
    return scores


def _max_similarity(embeddings: np.ndarray) -> np.ndarray:
    if len(embeddings) < 2:
        return np.zeros(len(embeddings))
    sims = np.asarray(embeddings, dtype=np.float64) @ np.asarray(embeddings, dtype=np.float64).T
    np.fill_diagonal(sims, -np.inf)
    return sims.max(axis=1)


def _pick_one(
    records: Sequence[Record],
    embeddings: np.ndarray,
    policy: str,
    weights: RetentionWeights | None,
    rng: np.random.Generator,
) -> int:
    n = len(records)
    age = np.array([r.created_order for r in records], dtype=np.float64)
    if policy == "random":
        return int(rng.integers(n))
    if policy == "recent":
        badness = -age
    elif policy == "similarity":
        badness = _max_similarity(embeddings)
    elif policy == "utility":
        badness = -keep_scores(records, embeddings, weights)
    else:
        raise ValueError(f"retention policy must be one of {RETENTION_POLICIES}, got {policy!r}")
    worst = np.flatnonzero(badness == badness.max())
    return int(worst[np.argmin(age[worst])])


def choose_evictions(
    records: Sequence[Record],
    embeddings: np.ndarray,
    n_remove: int,
    policy: str = "utility",
    *,
    weights: RetentionWeights | None = None,
    rng: np.random.Generator | None = None,
) -> list[str]:
    """Ids of the `n_remove` records the policy removes from the pool (records + their situation
    embeddings, rows aligned)."""
    if policy not in RETENTION_POLICIES:
        raise ValueError(f"retention policy must be one of {RETENTION_POLICIES}, got {policy!r}")
    rng = rng or np.random.default_rng(0)
    pool, emb = list(records), np.asarray(embeddings)
    out: list[str] = []
    for _ in range(max(0, min(n_remove, len(pool)))):
        i = _pick_one(pool, emb, policy, weights, rng)
        out.append(pool[i].record_id)
        del pool[i]
        emb = np.delete(emb, i, axis=0)
    return out
