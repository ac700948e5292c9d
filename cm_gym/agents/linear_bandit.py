"""The linear contextual bandit frame LinUCB and Thompson sampling share (issue 34).

cm_gym's decision is close to a contextual bandit: one choice among skip and ≤ 3 retrieved slots,
a reward seen at once. Each arm's context is read from z_t alone (`cm_gym.envs.features`):

- *use slot j*: ``[slot j's six features (validity left out), the six budget features, 1]``
  (13 dims), one linear model shared by the slots — slots are positions, not fixed arms, so a
  model per slot would learn the retrieval rank, not the record;
- *skip*: ``[the six budget features, 1]`` (7 dims), its own model.

The reward is the env's reward of the decision (SPEC §5: the solve reward at the end minus the
costs of the decision); a bandit ignores what a decision does to later decisions of the episode
(γ = 0), which is what separates it from the masked DQN.

Each model is ridge regression kept in the Sherman–Morrison form: A = λ·I + Σ x xᵀ, b = Σ r x,
θ̂ = A⁻¹ b, with ``RIDGE = 1.0`` (A₀ = I_d in Li et al. 2010, Algorithm 1; the prior
precision of Agrawal & Goyal 2013's B = I_d). Evaluation is greedy: θ̂ᵀx, no bonus, no sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agents.learned import LearnedSelector, budget_inputs, slot_inputs
from cm_gym.envs.features import N_SLOTS, VALIDITY_INDICES

RIDGE = 1.0
USE, SKIP = "use", "skip"


def use_context(obs: np.ndarray, j: int) -> np.ndarray:
    """The *use slot j* arm's context (13 dims)."""
    return np.concatenate([slot_inputs(obs, j), budget_inputs(obs), [1.0]])


def skip_context(obs: np.ndarray) -> np.ndarray:
    """The *skip* arm's context (7 dims)."""
    return np.concatenate([budget_inputs(obs), [1.0]])


class RidgeArm:
    """One arm's ridge regression: A⁻¹ kept by Sherman–Morrison, b, and θ̂ = A⁻¹ b."""

    def __init__(self, dim: int, ridge: float = RIDGE) -> None:
        self.a_inv = np.eye(dim) / ridge
        self.b = np.zeros(dim)
        self.n = 0

    @property
    def theta(self) -> np.ndarray:
        return self.a_inv @ self.b

    def width(self, x: np.ndarray) -> float:
        """√(xᵀ A⁻¹ x): the confidence width of the estimate at x."""
        return float(np.sqrt(max(0.0, x @ self.a_inv @ x)))

    def update(self, x: np.ndarray, reward: float) -> None:
        ax = self.a_inv @ x
        self.a_inv -= np.outer(ax, ax) / (1.0 + x @ ax)
        self.b += reward * x
        self.n += 1


class LinearBandit(LearnedSelector):
    """Greedy θ̂ᵀx over skip and the valid slots; subclasses add the exploration rule."""

    name = "linear-bandit"

    def __init__(
        self, env: Any = None, seed: int = 0, validity_indices: Sequence[int] = VALIDITY_INDICES
    ) -> None:
        super().__init__(env, seed, validity_indices)
        self.arms = {USE: RidgeArm(13), SKIP: RidgeArm(7)}

    def contexts(self, obs: np.ndarray, mask: np.ndarray) -> list[tuple[str, np.ndarray] | None]:
        """Per action (skip, slot 1..N): its arm and context, None where masked."""
        out: list[tuple[str, np.ndarray] | None] = [(SKIP, skip_context(obs))]
        for j in range(1, N_SLOTS + 1):
            out.append((USE, use_context(obs, j)) if j < len(mask) and mask[j] else None)
        return out

    def scores(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> np.ndarray:
        return np.array(
            [-np.inf if c is None else float(self.arms[c[0]].theta @ c[1]) for c in self.contexts(obs, mask)]
        )

    def observe(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        info: dict[str, Any],
        context: dict[str, Any] | None,
    ) -> None:
        if info.get("invalid_action"):
            action = 0  # it ran as skip
        arm, x = self.contexts(obs, np.ones(1 + N_SLOTS, dtype=bool))[action] or (SKIP, skip_context(obs))
        self.arms[arm].update(x, reward)

    def stats(self) -> dict[str, Any]:
        return {
            "updates": {name: arm.n for name, arm in self.arms.items()},
            "theta": {name: [round(float(v), 6) for v in arm.theta] for name, arm in self.arms.items()},
        }
