"""MemRL's value-driven record choice, adapted to cm_gym's decision (issue 34).

Source: MemRL (MemTensor/MemRL, arXiv 2601.03192), ``memrl/service/value_driven.py``
(`ValueAwareSelector`, `QValueUpdater`), ``memrl/service/memory_service.py`` (the hybrid score)
and ``memrl/configs/config.py`` (`RLConfig`), read at commit 7c3beba; no code is copied. The rule:

1. *Similarity filter* (phase A): keep the candidates whose similarity is at least δ, the k1 most
   similar; when even the most similar is below δ, take the **null action** (no memory).
2. *Value ranking* (phase B): score each kept candidate by λ·Q + (1 − λ)·sim and keep the top k2;
   candidates with Q below `q_min` are dropped first. ε-greedy: with probability ε a random
   sample of the kept candidates instead of the top ones.
3. *Update* when the task ends: every record used gets Q ← Q + α(r − Q) (γ = 0: one-step
   Monte-Carlo), r = +1 for success and −1 for failure; Q starts at 0.

Constants and where they come from:

- ``DELTA = 0.38`` and ``K1 = 10``: the similarity threshold and candidate count of phase A as the
  paper and issue 34 state them (the released configs vary the threshold per benchmark: τ = 0.35
  in ``config.py`` and the BigCodeBench / LLB configs, 0.62 ALFWorld, 0.25 HLE).
- ``LAMBDA = 0.5``: ``weight_q = weight_sim = 0.5`` (config.py and every released config).
- ``K2 = 5``: ``topk: int = 5`` (config.py; the BigCodeBench and LLB configs).
- ``ALPHA = 0.3``: ``alpha`` in config.py and every released config.
- ``EPSILON = 0.1``: ``epsilon`` in config.py and the BigCodeBench config (ALFWorld / HLE use 0).
- ``Q_INIT = 0.0``: ``q_init_pos`` in config.py. ``Q_MIN = -0.8``: ``q_min_threshold`` in config.py.
- ``SUCCESS_REWARD = 1.0``, ``FAILURE_REWARD = -1.0``: ``success_reward`` / ``failure_reward``.
- ``GAMMA = 0.0``: ``gamma`` in config.py and every released config.

Adaptation to cm_gym (the rule is otherwise unchanged):

- Candidates are the ≤ k (3 by default) records cm_gym's retrieval offers at the decision, not a
  recall of k1 = 10: K1 is never binding. Similarity is the slot's relevance feature (the same
  cosine retrieval ranks by).
- The frozen LLM sees one record per decision (cm_gym's action space), so of the k2 ranked
  records it sees the first; ε-greedy then draws one of the kept candidates uniformly.
- The score uses raw Q and similarity, as the paper writes it (the released service can z-score
  both over the candidates first; with ≤ 3 candidates that would make the order depend on which
  others were retrieved).
- Q is keyed on the record id, read from ``env.unwrapped.decision_context()`` (the observation
  carries the records' statistics, not their identity). Q is learned on the training stream with
  the store frozen; evaluation is greedy (ε is not applied) and updates nothing, as cm_gym
  evaluates every selector. A record never met in training keeps Q_INIT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agents.learned import LearnedSelector, relevance
from cm_gym.envs.features import N_SLOTS, VALIDITY_INDICES

DELTA = 0.38
K1 = 10
LAMBDA = 0.5
K2 = 5
ALPHA = 0.3
EPSILON = 0.1
Q_INIT = 0.0
Q_MIN = -0.8
SUCCESS_REWARD = 1.0
FAILURE_REWARD = -1.0
GAMMA = 0.0


class MemRL(LearnedSelector):
    """Per-record Q with MemRL's two-phase choice and Monte-Carlo update (see the module doc)."""

    name = "memrl"
    uses_context = True

    def __init__(
        self,
        env: Any = None,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        *,
        delta: float = DELTA,
        k1: int = K1,
        lam: float = LAMBDA,
        k2: int = K2,
        alpha: float = ALPHA,
        epsilon: float = EPSILON,
        q_init: float = Q_INIT,
        q_min: float | None = Q_MIN,
    ) -> None:
        super().__init__(env, seed, validity_indices)
        self.delta, self.k1, self.lam, self.k2 = float(delta), int(k1), float(lam), int(k2)
        self.alpha, self.epsilon, self.q_init, self.q_min = float(alpha), float(epsilon), float(q_init), q_min
        self.q: dict[str, float] = {}
        self.visits: dict[str, int] = {}
        self._used: list[str] = []
        self.null_actions = 0

    def value(self, record_id: str) -> float:
        """The record's learned Q (Q_INIT when it was never used in training)."""
        return self.q.get(record_id, self.q_init)

    def ranked(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> list[int]:
        """The kept slots, best first: phase A (similarity ≥ δ, the k1 most similar; empty when
        the most similar is below δ) then phase B (Q ≥ q_min, by λ·Q + (1 − λ)·sim, top k2)."""
        assert context is not None
        ids = context["record_ids"]
        slots = [j for j in range(1, N_SLOTS + 1) if j < len(mask) and mask[j] and j <= len(ids)]
        sims = {j: relevance(obs, j) for j in slots}
        if not slots or max(sims.values()) < self.delta:
            return []  # the null action
        kept = sorted((j for j in slots if sims[j] >= self.delta), key=lambda j: -sims[j])[: self.k1]
        qs = {j: self.value(ids[j - 1]) for j in kept}
        if self.q_min is not None:
            kept = [j for j in kept if qs[j] >= self.q_min]
        score = {j: self.lam * qs[j] + (1.0 - self.lam) * sims[j] for j in kept}
        return sorted(kept, key=lambda j: (-score[j], j))[: self.k2]

    def scores(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> np.ndarray:
        out = np.full(1 + N_SLOTS, -np.inf)
        ranked = self.ranked(obs, mask, context)
        out[ranked[0] if ranked else 0] = 0.0
        return out

    def explore(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> int:
        ranked = self.ranked(obs, mask, context)
        if not ranked:
            self.null_actions += bool(mask[1:].any())  # records were offered, none kept
            return 0
        if self.rng.random() < self.epsilon:
            return int(self.rng.choice(ranked))
        return ranked[0]

    def observe(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        info: dict[str, Any],
        context: dict[str, Any] | None,
    ) -> None:
        if action > 0 and context is not None and not info.get("invalid_action"):
            self._used.append(context["record_ids"][action - 1])

    def end_episode(self, info: dict[str, Any]) -> None:
        r = SUCCESS_REWARD if info.get("solved") else FAILURE_REWARD
        for record_id in dict.fromkeys(self._used):  # each record used in the task, once
            old = self.value(record_id)
            self.q[record_id] = old + self.alpha * (r - old)  # target r + γ·max Q' with γ = 0
            self.visits[record_id] = self.visits.get(record_id, 0) + 1
        self._used = []

    def stats(self) -> dict[str, Any]:
        """The learned values (MemRL's users ask to see them): how many records were updated,
        their Q spread, and the Q and update count of each."""
        values = np.array(list(self.q.values())) if self.q else np.zeros(0)
        return {
            "records_updated": len(self.q),
            "q_mean": float(values.mean()) if len(values) else None,
            "q_min": float(values.min()) if len(values) else None,
            "q_max": float(values.max()) if len(values) else None,
            "null_actions": self.null_actions,  # training decisions with records that took none
            "q": {k: round(v, 6) for k, v in sorted(self.q.items())},
            "visits": dict(sorted(self.visits.items())),
            "exploration": {"epsilon": self.epsilon, "delta": self.delta, "lambda": self.lam},
        }
