"""MaskedDQN: stable-baselines3's DQN with action masking in the four places that need it.

1. greedy action — `MaskedQNetwork._predict` takes the arg-max over valid actions only;
2. ε-exploration — `predict` draws a random *valid* action;
3. warm-up (before `learning_starts`) — `_sample_action` draws a random *valid* action;
4. the TD target — `train` takes max over the valid actions of the next observation
   (``masked_fill(−inf)`` then ``max``; skip is always valid so no row is all-masked). The taken
   action's Q in the loss is never masked.

The mask is read from the observation's validity features, so the replay buffer carries it and no
custom buffer is needed; in the opt-in pair action space (Discrete(17), `features.PAIR_SLOTS`) a
pair's validity is derived from its two slots'. Defaults are the paper's Table 3 (`TABLE3`).
"""

from __future__ import annotations

import io
import pathlib
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.type_aliases import GymEnv
from torch.nn import functional as F

from cm_gym.agents.policies import MaskedDQNPolicy, masked_max
from cm_gym.envs.features import OBS_DIM, ObservationLayoutError, layout_of, mask_from_observation

SelfMaskedDQN = TypeVar("SelfMaskedDQN", bound="MaskedDQN")

#: Paper Table 3 (selector DQN). `exploration_fraction` is ours: ε decays 0.30 → 0.05 over the
#: first half of training (the paper gives the endpoints only).
TABLE3: dict[str, Any] = {
    "learning_rate": 1e-3,
    "buffer_size": 10_000,
    "learning_starts": 100,
    "batch_size": 32,
    "gamma": 0.95,
    "train_freq": 4,
    "gradient_steps": 1,
    "target_update_interval": 250,
    "exploration_initial_eps": 0.30,
    "exploration_final_eps": 0.05,
    "exploration_fraction": 0.5,
    "tau": 1.0,
}
TABLE3_POLICY_KWARGS: dict[str, Any] = {
    "net_arch": [64, 64],
    "activation_fn": th.nn.ReLU,
    "optimizer_class": th.optim.Adam,
    "optimizer_kwargs": {"eps": 1e-8},
}


def random_valid_actions(mask: np.ndarray, rng: Any = np.random) -> np.ndarray:
    """One uniformly random valid action per row of a (n, n_actions) boolean mask."""
    mask = np.atleast_2d(np.asarray(mask, dtype=bool))
    out = np.empty(mask.shape[0], dtype=np.int64)
    for i, row in enumerate(mask):
        valid = np.flatnonzero(row)
        out[i] = valid[rng.randint(len(valid))] if hasattr(rng, "randint") else rng.choice(valid)
    return out


class MaskedDQN(DQN):
    """DQN whose greedy, exploring and warm-up actions are always valid and whose target max
    ignores invalid next-state actions. Use it exactly like SB3's DQN:

    >>> model = MaskedDQN(env=gymnasium.make("cm_gym/SQL-v0"), seed=0)  # doctest: +SKIP
    >>> model.learn(2_000)  # doctest: +SKIP

    `loss` is "mse" (the paper's Eq. 13, default) or "huber" (SB3's DQN loss).
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MaskedDQNPolicy,
        "MaskedMlpPolicy": MaskedDQNPolicy,
    }
    policy: MaskedDQNPolicy

    def __init__(
        self,
        policy: str | type[MaskedDQNPolicy] = "MlpPolicy",
        env: GymEnv | str | None = None,
        *,
        loss: str = "mse",
        policy_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if loss not in ("mse", "huber"):
            raise ValueError(f"loss must be 'mse' or 'huber', got {loss!r}")
        self.loss = loss
        merged_policy_kwargs = {**TABLE3_POLICY_KWARGS, **(policy_kwargs or {})}
        params = {**TABLE3, **kwargs}
        super().__init__(policy, env, policy_kwargs=merged_policy_kwargs, **params)  # type: ignore[arg-type]

    def _setup_model(self) -> None:
        super()._setup_model()
        if not isinstance(self.policy, MaskedDQNPolicy):
            raise ObservationLayoutError(
                f"MaskedDQN needs a MaskedDQNPolicy, got {type(self.policy).__name__}"
            )

    # -- masking helpers ----------------------------------------------------------------------
    def action_mask(self, observation: np.ndarray) -> np.ndarray:
        """Boolean mask (n, n_actions) read from (a batch of) observations."""
        obs = np.asarray(observation)
        if obs.ndim == 1:
            obs = obs[None]
        return mask_from_observation(obs, self.policy.validity_indices, pairs=self.policy.pairs)

    def _random_valid(self, observation: np.ndarray) -> np.ndarray:
        return random_valid_actions(self.action_mask(observation))

    # -- (2) ε-exploration and (1) greedy ------------------------------------------------------
    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """ε-greedy over valid actions (greedy when `deterministic`)."""
        if isinstance(observation, dict):
            raise ObservationLayoutError("MaskedDQN expects a flat Box observation, got a dict")
        if not deterministic and np.random.rand() < self.exploration_rate:
            actions = self._random_valid(observation)
            if not self.policy.is_vectorized_observation(observation):
                return np.array(actions[0]), state
            return actions, state
        return self.policy.predict(observation, state, episode_start, deterministic)

    # -- (3) warm-up ----------------------------------------------------------------------------
    def _sample_action(
        self,
        learning_starts: int,
        action_noise: ActionNoise | None = None,
        n_envs: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.num_timesteps < learning_starts:
            assert self._last_obs is not None, "self._last_obs was not set"
            actions = self._random_valid(self._last_obs)  # type: ignore[arg-type]
            return actions, actions
        return super()._sample_action(0, action_noise, n_envs)

    # -- (4) masked TD target -------------------------------------------------------------------
    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        """SB3's DQN update with the target max restricted to next-state valid actions."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        losses = []
        for _ in range(gradient_steps):
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)  # type: ignore[union-attr]
            discounts = data.discounts if data.discounts is not None else self.gamma
            with th.no_grad():
                next_q = self.q_net_target(data.next_observations)
                next_mask = self.policy.action_mask(data.next_observations)  # type: ignore[arg-type]
                next_q = masked_max(next_q, next_mask).reshape(-1, 1)
                target = data.rewards + (1 - data.dones) * discounts * next_q
            current = th.gather(self.q_net(data.observations), dim=1, index=data.actions.long())
            if self.loss == "mse":
                loss = F.mse_loss(current, target)
            else:
                loss = F.smooth_l1_loss(current, target)
            losses.append(loss.item())
            self.policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            self.policy.optimizer.step()
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", float(np.mean(losses)))

    # -- checkpoints ----------------------------------------------------------------------------
    @classmethod
    def load(  # type: ignore[override]
        cls: type[SelfMaskedDQN],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        observation_space: spaces.Space | None = None,
        expected_obs_dim: int | None = OBS_DIM,
        **kwargs: Any,
    ) -> SelfMaskedDQN:
        """Load a checkpoint; a checkpoint for a different observation size (or an unmasked DQN
        checkpoint) is refused with `ObservationLayoutError` before anything is built.

        The size is checked against `env`'s observation space, else `observation_space`, else
        ``(expected_obs_dim,)`` (98 = the paper layout, 106 = the extended one; None skips the
        check), so a checkpoint of one `obs_layout` refuses the other."""
        expected = (
            observation_space if observation_space is not None else getattr(env, "observation_space", None)
        )
        if expected is None and expected_obs_dim is not None:
            expected = spaces.Box(-np.inf, np.inf, (int(expected_obs_dim),), np.float32)
        if isinstance(path, (str, pathlib.Path)):
            data, _, _ = load_from_zip_file(path, load_data=True, device="cpu")
            if data is None or "observation_space" not in data:
                raise ObservationLayoutError(f"{path}: no observation space stored in this checkpoint")
            saved = data["observation_space"]
            if expected is not None and getattr(saved, "shape", None) != getattr(expected, "shape", None):
                have, want = layout_of(saved.shape[-1]), layout_of(expected.shape[-1])
                raise ObservationLayoutError(
                    f"{path}: checkpoint was trained on observations of shape {saved.shape} ({have} "
                    f"layout), but the environment gives shape {expected.shape} ({want} layout); "
                    "evaluate it with its own obs_layout or retrain for this one"
                )
            policy_class = data.get("policy_class")
            if isinstance(policy_class, type) and not issubclass(policy_class, MaskedDQNPolicy):
                raise ObservationLayoutError(
                    f"{path}: checkpoint policy {policy_class.__name__} is not a MaskedDQNPolicy"
                )
        return super().load(  # type: ignore[return-value]
            path,
            env=env,
            device=device,
            custom_objects=custom_objects,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )
