"""Policies of a "user package" for the evaluation tests (importable as tests.policy_fixtures)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cm_gym.envs.features import mask_from_observation


class HighestSlot:
    """A hand-written policy: the highest valid slot, read from the observation (mask-aware)."""

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, None]:  # fmt: skip
        mask = mask_from_observation(np.asarray(observation)[None])[0]
        return np.array(int(np.flatnonzero(mask)[-1])), None


class AlwaysFour:
    """A careless policy: always slot 4 (masked whenever fewer than 4 records were retrieved)."""

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, None]:  # fmt: skip
        return np.array(4), None


class MaskSpy:
    """Records the masks it is given (it takes ``action_masks=`` like MaskablePPO)."""

    def __init__(self) -> None:
        self.masks: list[np.ndarray] = []

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True, action_masks: np.ndarray | None = None) -> tuple[np.ndarray, None]:  # fmt: skip
        assert action_masks is not None
        self.masks.append(np.asarray(action_masks))
        return np.array(int(np.flatnonzero(action_masks)[-1])), None


def make_policy(env: Any, seed: int) -> HighestSlot:
    """A factory, as `cm-gym evaluate --policy NAME=tests.policy_fixtures:make_policy` calls it."""
    assert env.observation_space.shape[0] >= 98 and seed >= 0
    return HighestSlot()
