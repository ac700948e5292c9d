"""Linear Thompson sampling on z_t per slot (issue 34).

Source: S. Agrawal, N. Goyal, "Thompson Sampling for Contextual Bandits with Linear Payoffs",
ICML 2013 (arXiv 1209.3352), Algorithm 1: B = I_d + Σ x xᵀ, μ̂ = B⁻¹ Σ r x, and at each decision
one θ̃ ~ N(μ̂, v²·B⁻¹) per arm model, playing arg-max θ̃ᵀx. The arms and contexts are those of
`cm_gym.agents.linear_bandit`; evaluation is greedy (μ̂ᵀx, no sampling), frozen.

Constants:

- ``V = 0.25``: the posterior scale v. Agrawal & Goyal's v = R·√(24·d·ln(1/δ)/ε) is a proof
  device (≈ 10² here, a uniformly random policy for any training budget cm_gym uses); we take v
  as the noise scale R of the reward instead — a decision's reward is the solve reward (1) minus
  costs (0.15 per evaluator call, 0.25 per failure, tokens; `DEFAULT_REWARD_WEIGHTS`), so its
  spread is that of a Bernoulli solve, standard deviation at most 0.5; v = 0.25 is that bound
  halved, our choice, not a published value.
- ``RIDGE = 1.0``: B₀ = I_d (Algorithm 1), in `cm_gym.agents.linear_bandit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agents.linear_bandit import LinearBandit
from cm_gym.envs.features import VALIDITY_INDICES

V = 0.25


class ThompsonSampling(LinearBandit):
    """Linear Thompson sampling over skip / use-a-slot (see the module doc)."""

    name = "thompson"

    def __init__(
        self,
        env: Any = None,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        *,
        v: float = V,
    ) -> None:
        super().__init__(env, seed, validity_indices)
        self.v = float(v)

    def explore(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> int:
        sampled = {}
        for name, arm in self.arms.items():
            cov = self.v**2 * (arm.a_inv + arm.a_inv.T) / 2.0
            sampled[name] = self.rng.multivariate_normal(arm.theta, cov, method="cholesky")
        values = [-np.inf if c is None else float(sampled[c[0]] @ c[1]) for c in self.contexts(obs, mask)]
        return int(np.argmax(np.where(mask, values, -np.inf)))

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "exploration": {"v": self.v}}
