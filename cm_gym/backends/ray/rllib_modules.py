"""RLlib modules that read the action mask from ``Dict(observations, action_mask)`` observations
(`cm_gym.envs.wrappers.ActionMaskObservation`), RLlib's masking convention.

* PPO: RLlib's own `ActionMaskingTorchRLModule` (log(mask) added to the logits: a masked slot is
  never sampled nor chosen greedily).
* DQN: `MaskedDQNTorchRLModule` below. RLlib ships no masked DQN module, so this one sets the
  Q-values of masked slots to −inf in every forward pass (online and target network): the greedy
  action and the double-Q target's argmax range over valid slots only, and ε-exploration draws
  uniformly among valid slots — the masked DQN of the paper (Eq. 12–13) on RLlib's learner.

Imports Ray (only through `cm_gym.backends.ray`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from ray.rllib.algorithms.dqn.default_dqn_rl_module import QF_PREDS
from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import DefaultDQNTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

__all__ = ["ActionMaskingTorchRLModule", "MaskedDQNTorchRLModule"]


class MaskedDQNTorchRLModule(DefaultDQNTorchRLModule):
    """RLlib's default DQN module on the ``observations`` entry, masked by ``action_mask``."""

    def __init__(self, *, observation_space: gym.Space | None = None, **kwargs: Any) -> None:
        if not isinstance(observation_space, gym.spaces.Dict) or set(observation_space.spaces) != {
            "observations",
            "action_mask",
        }:
            raise ValueError(
                "MaskedDQNTorchRLModule needs Dict(observations=..., action_mask=...) observations "
                f"(wrap the env in cm_gym.envs.wrappers.ActionMaskObservation), got {observation_space}"
            )
        self._space_with_mask = observation_space
        super().__init__(observation_space=observation_space["observations"], **kwargs)

    def setup(self) -> None:
        if self.model_config.get("num_atoms", 1) > 1:
            raise ValueError("MaskedDQNTorchRLModule masks expected Q-values: use num_atoms=1")
        super().setup()  # networks built for the inner observation space
        self.observation_space = self._space_with_mask

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        obs = batch[Columns.OBS]
        if isinstance(obs, dict):
            return obs["action_mask"], {**batch, Columns.OBS: obs["observations"]}
        return None, batch

    def _qf_forward_helper(self, batch: dict[str, Any], encoder: Any, head: Any) -> dict[str, Any]:
        mask, inner = self._split(batch)
        out = super()._qf_forward_helper(inner, encoder, head)
        if mask is not None:
            out[QF_PREDS] = out[QF_PREDS].masked_fill(mask <= 0, float("-inf"))
        return out

    def _forward_exploration(self, batch: dict[str, Any], t: int) -> dict[str, Any]:
        mask, _ = self._split(batch)
        out = self._forward_inference(batch)
        self.epsilon_schedule.update(t)
        epsilon = self.epsilon_schedule.get_current_value()
        greedy = out[Columns.ACTIONS]
        random = torch.multinomial((mask > 0).float(), num_samples=1).squeeze(1)
        out[Columns.ACTIONS] = torch.where(torch.rand(greedy.shape[0]) < epsilon, random, greedy)
        return out
