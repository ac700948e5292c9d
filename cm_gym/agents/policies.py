"""Masked Q-network policy for stable-baselines3's DQN.

The mask is read from the observation's validity features (`cm_gym.envs.features.VALIDITY_INDICES`),
so every observation in the replay buffer carries the mask of its own decision. Skip (action 0) is
always valid. Masked slots get −inf before the arg-max, so a greedy action is never a masked one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.type_aliases import PyTorchObs
from stable_baselines3.dqn.policies import DQNPolicy, QNetwork

from cm_gym.envs.features import (
    N_PAIR_ACTIONS,
    N_SLOTS,
    VALIDITY_INDICES,
    ObservationLayoutError,
    mask_from_observation,
)


def masked_max(q_values: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """Row-wise max of `q_values` over the valid actions only (masked_fill with −inf, then max).

    Skip is always valid, so the result is finite for every row."""
    return q_values.masked_fill(~mask, float("-inf")).max(dim=1).values


def masked_argmax(q_values: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """Row-wise arg-max of `q_values` over the valid actions only."""
    return q_values.masked_fill(~mask, float("-inf")).argmax(dim=1)


def is_pair_space(action_space: spaces.Space, validity_indices: Sequence[int]) -> bool:
    """Whether `action_space` is the opt-in pair action space over these slots (Discrete(17))."""
    return (
        isinstance(action_space, spaces.Discrete)
        and int(action_space.n) == N_PAIR_ACTIONS
        and len(validity_indices) == N_SLOTS
    )


def check_validity_indices(
    observation_space: spaces.Space, action_space: spaces.Space, validity_indices: Sequence[int]
) -> tuple[int, ...]:
    """Refuse a mask layout that does not fit the spaces (clear error instead of an index crash)."""
    if not isinstance(action_space, spaces.Discrete):
        raise ObservationLayoutError(f"masked DQN needs a Discrete action space, got {action_space}")
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        raise ObservationLayoutError(f"masked DQN needs a flat Box observation, got {observation_space}")
    idx = tuple(int(i) for i in validity_indices)
    if len(idx) + 1 != int(action_space.n) and not is_pair_space(action_space, idx):
        raise ObservationLayoutError(
            f"{len(idx)} validity features give {len(idx) + 1} actions (or {N_PAIR_ACTIONS} with pairs "
            f"of {N_SLOTS} slots), action space has {action_space.n}"
        )
    if idx and max(idx) >= observation_space.shape[0]:
        raise ObservationLayoutError(
            f"validity index {max(idx)} is outside the {observation_space.shape[0]}-dim observation"
        )
    return idx


class MaskedQNetwork(QNetwork):
    """QNetwork whose greedy action ignores slots that the observation marks invalid."""

    def __init__(self, *args: Any, validity_indices: Sequence[int] = VALIDITY_INDICES, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.validity_indices = check_validity_indices(
            self.observation_space, self.action_space, validity_indices
        )
        self.pairs = is_pair_space(self.action_space, self.validity_indices)

    def action_mask(self, observation: th.Tensor) -> th.Tensor:
        """Boolean mask (batch, n_actions) read from the observations (pair-aware)."""
        return mask_from_observation(observation, self.validity_indices, pairs=self.pairs)

    def _predict(self, observation: PyTorchObs, deterministic: bool = True) -> th.Tensor:
        assert isinstance(observation, th.Tensor)
        q_values = self(observation)
        return masked_argmax(q_values, self.action_mask(observation)).reshape(-1)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["validity_indices"] = self.validity_indices
        return data


class MaskedDQNPolicy(DQNPolicy):
    """DQNPolicy (MLP, default [64, 64] ReLU) whose Q-networks mask invalid slots.

    `validity_indices` tells where each slot's validity feature sits in the observation; the
    default is the 98-dim layout of `cm_gym.envs.features`.
    """

    q_net: MaskedQNetwork
    q_net_target: MaskedQNetwork

    def __init__(
        self,
        *args: Any,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        **kwargs: Any,
    ) -> None:
        self.validity_indices = tuple(int(i) for i in validity_indices)
        super().__init__(*args, **kwargs)

    def make_q_net(self) -> MaskedQNetwork:
        net_args = self._update_features_extractor(self.net_args, features_extractor=None)
        return MaskedQNetwork(**net_args, validity_indices=self.validity_indices).to(self.device)

    @property
    def pairs(self) -> bool:
        """Whether this policy acts in the opt-in pair action space (Discrete(17))."""
        return is_pair_space(self.action_space, self.validity_indices)

    def action_mask(self, observation: th.Tensor) -> th.Tensor:
        """Boolean mask (batch, n_actions) read from the observations (pair-aware)."""
        return mask_from_observation(observation, self.validity_indices, pairs=self.pairs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["validity_indices"] = self.validity_indices
        return data
