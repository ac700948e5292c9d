"""Selector-side ablations that do not belong in the env: hide observation features from the
policy, or limit how many slots it may choose from. (Retrieval mode, the condition switch, k and
budgets are env arguments.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from cm_gym.envs import features as F
from cm_gym.envs._actions import checked_action

#: Groups `FeatureAblation` can hide. Validity is never hidden: it carries the mask.
FEATURE_GROUPS: dict[str, list[int]] = {
    "state": list(range(F.STATE.start, F.STATE.stop)),
    "draft": list(range(F.DRAFT.start, F.DRAFT.stop)),
    "budget": list(range(F.BUDGET.start, F.BUDGET.stop)),
    **{
        name: [F.slot(j).start + i for j in range(1, F.N_SLOTS + 1)]
        for i, name in enumerate(F.SLOT_FEATURES)
        if name != "validity"
    },
}
FEATURE_GROUPS["reuse_statistics"] = (
    FEATURE_GROUPS["reuse_utility"] + FEATURE_GROUPS["use_frequency"] + FEATURE_GROUPS["helpful_fraction"]
)


class FeatureAblation(gym.ObservationWrapper):
    """Zero the named feature groups of z_t (e.g. ``drop=("reuse_statistics",)`` or ``("draft",)``)
    so a selector is trained without them. The mask (validity features) is kept intact."""

    def __init__(self, env: gym.Env, drop: Iterable[str]) -> None:
        super().__init__(env)
        names = list(drop)
        unknown = sorted(set(names) - set(FEATURE_GROUPS))
        if unknown:
            raise ValueError(f"unknown feature group(s) {unknown}; known: {sorted(FEATURE_GROUPS)}")
        self.drop = tuple(names)
        self._index = np.array(sorted({i for n in names for i in FEATURE_GROUPS[n]}), dtype=np.int64)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        obs = np.array(observation, dtype=np.float32, copy=True)
        obs[..., self._index] = 0.0
        return obs

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        return super().step(checked_action(self.action_space, action))

    def peek(self, action: Any) -> Any:
        return self.env.get_wrapper_attr("peek")(checked_action(self.action_space, action))


class SlotLimit(gym.Wrapper):
    """Offer the selector only the first `n_slots` retrieved records: later slots are zeroed in
    the observation, masked in ``action_masks()`` / ``info["action_mask"]``, and an action on
    them runs as skip with ``info["invalid_action"] = True``. An action that is not an integer of
    the action space is refused first (`InvalidActionError`), as the wrapped env refuses it."""

    def __init__(self, env: gym.Env, n_slots: int) -> None:
        super().__init__(env)
        if not 0 <= n_slots <= F.N_SLOTS:
            raise ValueError(f"n_slots must be in 0..{F.N_SLOTS}, got {n_slots}")
        self.n_slots = n_slots
        self._hidden = np.array(
            [i for j in range(n_slots + 1, F.N_SLOTS + 1) for i in range(F.slot(j).start, F.slot(j).stop)],
            dtype=np.int64,
        )
        self._pairs = getattr(env.action_space, "n", F.N_ACTIONS) == F.N_PAIR_ACTIONS  # the pair space
        self._last_mask = np.ones(F.N_PAIR_ACTIONS if self._pairs else F.N_ACTIONS, dtype=bool)

    def _limit(self, obs: np.ndarray, info: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        obs = np.array(obs, dtype=np.float32, copy=True)
        obs[self._hidden] = 0.0
        self._last_mask = F.mask_from_observation(obs, pairs=self._pairs)
        info = dict(info)
        info["action_mask"] = self._last_mask.copy()
        return obs, info

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self._limit(obs, info)

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        index = checked_action(self.action_space, action)
        invalid = not self._last_mask[index]
        obs, reward, terminated, truncated, info = self.env.step(0 if invalid else index)
        obs, info = self._limit(obs, info)
        if invalid:
            info["invalid_action"] = True
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        return self._last_mask.copy()

    def peek(self, action: Any) -> Any:
        index = checked_action(self.action_space, action)
        return self.env.get_wrapper_attr("peek")(index if self._last_mask[index] else 0)
