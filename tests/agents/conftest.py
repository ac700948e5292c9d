"""A tiny synthetic selection env with the 98-dim cm_gym layout, for testing selectors fast."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from cm_gym.core.types import Outcome
from cm_gym.envs import features as F

# tiny networks: one thread is much faster than contending for the shared cores
torch.set_num_threads(1)


class GoodSlotEnv(gym.Env):
    """Each decision offers 0..3 valid slots; at most one is "good" (its relevance feature is 1,
    the others 0.2). Using the good slot solves the task (+1, terminal), skip costs 0.1, a bad slot
    costs 0.5; three decisions per episode. Masked actions are counted in `invalid_actions`."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, max_decisions: int = 3, max_valid: int = 3) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (F.OBS_DIM,), np.float32)
        self.action_space = gym.spaces.Discrete(F.N_ACTIONS)
        self.max_decisions, self.max_valid = max_decisions, max_valid
        self.invalid_actions = 0
        self.peeks = 0
        self.actions_taken: list[int] = []
        self._t = 0
        self._n_valid = 0
        self._good = 0
        self._obs = np.zeros(F.OBS_DIM, np.float32)

    def _make_obs(self) -> np.ndarray:
        self._n_valid = int(self.np_random.integers(0, self.max_valid + 1))
        self._good = (
            int(self.np_random.integers(1, self._n_valid + 1))
            if self._n_valid and self.np_random.random() < 0.8
            else 0
        )
        slots = [
            F.SlotFeatures(1.0 if j == self._good else 0.2, 0.5, 0.3, 0.0, 0, 0.0)
            for j in range(1, self._n_valid + 1)
        ]
        budget = F.BudgetFeatures(
            self._t, self.max_decisions, self._t, self.max_decisions, self._t, 0, 1, 0.0
        )
        self._obs = F.build_observation(None, None, slots, budget)
        return self._obs

    def action_masks(self) -> np.ndarray:
        return F.mask_from_observation(self._obs)

    def peek(self, action: int) -> Outcome:
        """What `action` would score now, without changing anything (for the Oracle)."""
        self.peeks += 1
        good = int(action) == self._good and self._good > 0
        return Outcome(score=1.0 if good else (0.5 if int(action) == 0 else 0.0), solved=good)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._make_obs(), {"action_mask": self.action_masks()}

    def step(self, action: int):
        action = int(action)
        self.actions_taken.append(action)
        if not self.action_masks()[action]:
            self.invalid_actions += 1
            action = 0
        self._t += 1
        if action == 0:
            reward, solved = -0.1, False
        elif action == self._good:
            reward, solved = 1.0, True
        else:
            reward, solved = -0.5, False
        terminated = solved or self._t >= self.max_decisions
        obs = self._make_obs() if not terminated else np.zeros(F.OBS_DIM, np.float32)
        if terminated:
            self._obs = obs
        return obs, reward, terminated, False, {"action_mask": self.action_masks()}


@pytest.fixture
def good_slot_env() -> GoodSlotEnv:
    return GoodSlotEnv()
