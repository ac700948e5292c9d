"""LinUCB on z_t per slot (issue 34): the first contextual bandit an RL researcher tries.

Source: L. Li, W. Chu, J. Langford, R. E. Schapire, "A Contextual-Bandit Approach to Personalized
News Article Recommendation", WWW 2010 (arXiv 1003.0146), Algorithm 1 (disjoint linear models).
The arms and contexts are those of `cm_gym.agents.linear_bandit` (skip, and one model shared by
the slots); while training it picks arg-max θ̂ᵀx + α·√(xᵀA⁻¹x), and it is evaluated greedily
(α = 0), frozen, as cm_gym evaluates every selector.

Constants:

- ``DELTA = 0.05`` and ``ALPHA = 1 + √(ln(2/δ)/2) ≈ 2.358``: the exploration weight for which
  Li et al. (2010, Section 3.1, the disjoint model) state that the confidence bound holds with
  probability 1 − δ; δ = 0.05 is our choice of confidence level, not a published value.
- ``RIDGE = 1.0``: A₀ = I_d (Algorithm 1: A_a ← I_d for a new arm), in `cm_gym.agents.linear_bandit`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agents.linear_bandit import LinearBandit
from cm_gym.envs.features import VALIDITY_INDICES

DELTA = 0.05
ALPHA = 1.0 + math.sqrt(math.log(2.0 / DELTA) / 2.0)


class LinUCB(LinearBandit):
    """Disjoint LinUCB over skip / use-a-slot (see the module doc)."""

    name = "linucb"

    def __init__(
        self,
        env: Any = None,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        *,
        alpha: float = ALPHA,
    ) -> None:
        super().__init__(env, seed, validity_indices)
        self.alpha = float(alpha)

    def explore(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> int:
        ucb = [
            -np.inf
            if c is None
            else float(self.arms[c[0]].theta @ c[1]) + self.alpha * self.arms[c[0]].width(c[1])
            for c in self.contexts(obs, mask)
        ]
        return int(np.argmax(np.where(mask, ucb, -np.inf)))

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "exploration": {"alpha": self.alpha}}
