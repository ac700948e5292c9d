"""A supervised bound on what z_t can support: a small classifier trained on peeked outcomes.

`PeekedClassifier` learns, from (z_t, one-hot slot) pairs of decisions whose every option was
checked on a fork, whether using that slot beats skip (+1), ties (0) or is worse (−1). As a policy
it reads only the observation: at each decision it picks the valid slot with the largest
P(better) − P(worse) when that is positive, else skip. It is trained on labels no deployed selector
has (every option's outcome), so its score says how much of the oracle's head-room the observation
itself carries — not what reinforcement learning from rewards will reach. It is myopic (one
decision at a time), which is why it can trail the oracle even when z_t is informative.

Fit and prediction run on one OpenMP thread: a prediction is one decision's few rows, and on a
machine shared with other jobs OpenMP's thread barriers (hundreds per fit or predict) turned minutes
into more than half an hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from cm_gym.envs import features as F
from cm_gym.studies.analysis.peeked import PeekedDecision


def _pair_features(obs: np.ndarray, slot: int) -> np.ndarray:
    onehot = np.zeros(F.N_SLOTS, dtype=np.float32)
    onehot[slot - 1] = 1.0
    return np.concatenate([np.asarray(obs, dtype=np.float32), onehot])


def pairs(decisions: Sequence[PeekedDecision]) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): one row per (decision, valid slot); y = effect of using the slot vs skip."""
    xs, ys = [], []
    for d in decisions:
        for s in d.slots:
            xs.append(_pair_features(d.obs, s.slot))
            ys.append(d.effect(s))
    if not xs:
        return np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.int64)
    return np.vstack(xs), np.asarray(ys, dtype=np.int64)


class PeekedClassifier:
    """Gradient-boosted trees on (z_t, slot) → effect of using the slot; an SB3-style policy."""

    name = "supervised"

    def __init__(self, validity_indices: Sequence[int] = F.VALIDITY_INDICES, seed: int = 0) -> None:
        self.validity_indices = tuple(validity_indices)
        self.seed = seed
        self.model: Any = None
        self.classes: tuple[int, ...] = ()

    def fit(self, decisions: Sequence[PeekedDecision]) -> PeekedClassifier:
        from sklearn.ensemble import HistGradientBoostingClassifier

        X, y = pairs(decisions)
        self.classes = tuple(int(c) for c in np.unique(y))
        if len(self.classes) >= 2:
            with threadpool_limits(limits=1, user_api="openmp"):
                self.model = HistGradientBoostingClassifier(
                    max_iter=200, learning_rate=0.1, max_leaf_nodes=15, random_state=self.seed
                ).fit(X, y)
        return self

    def _proba(self, X: np.ndarray) -> np.ndarray:
        with threadpool_limits(limits=1, user_api="openmp"):
            return np.asarray(self.model.predict_proba(X))

    def gain(self, X: np.ndarray) -> np.ndarray:
        """P(better than skip) − P(worse than skip) for each row of X."""
        if len(X) == 0:
            return np.zeros(0)
        if self.model is None:  # one class only: every use has the same effect
            return np.full(len(X), float(self.classes[0]) if self.classes else 0.0)
        proba = self._proba(X)
        cls = list(self.model.classes_)
        up = proba[:, cls.index(1)] if 1 in cls else 0.0
        down = proba[:, cls.index(-1)] if -1 in cls else 0.0
        return np.asarray(up - down, dtype=np.float64)

    def help_probability(self, X: np.ndarray) -> np.ndarray:
        """P(better than skip) for each row of X (for the held-out AUC)."""
        if self.model is None or 1 not in list(self.model.classes_):
            return np.full(len(X), 1.0 if self.classes == (1,) else 0.0)
        return self._proba(X)[:, list(self.model.classes_).index(1)]

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, None]:
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        batch = obs[None] if single else obs
        masks = F.mask_from_observation(batch, self.validity_indices)
        actions = np.zeros(len(batch), dtype=np.int64)
        for i, (row, mask) in enumerate(zip(batch, masks, strict=True)):
            valid = [j for j in range(1, F.N_ACTIONS) if mask[j]]
            if not valid:
                continue
            gains = self.gain(np.vstack([_pair_features(row, j) for j in valid]))
            best = int(np.argmax(gains))
            if gains[best] > 0:
                actions[i] = valid[best]
        return (np.array(actions[0]) if single else actions), None
