"""Mask bridges: the selection env in the observation convention of RLlib, TorchRL and Tianshou.

`ActionMaskObservation` turns the flat observation into ``Dict(observations=Box(n),
action_mask=MultiBinary(5))`` — the form RLlib's action-masking RLModule, TorchRL's
``ActionMask`` transform and Tianshou's ``obs.mask`` expect. The observation size is read from the
wrapped env (the default 98-dim layout or any other), never assumed. ``mask_space="box"`` gives
``Box(0, 1, (5,), float32)`` instead, RLlib's example convention.

`make_masked_env(config)` is an env creator for ``ray.tune.registry.register_env``: a module-level
function of cm_gym, so a Ray worker that unpickles it imports cm_gym and with it every ``cm_gym/``
id. That is what avoids the usual failure under Ray, where workers never imported cm_gym:
``gymnasium.error.NamespaceNotFound: Namespace cm_gym not found`` followed by a misleading
``IndexError`` from RLlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from cm_gym.envs._actions import checked_action

MASK_SPACES = ("multibinary", "box")


class ActionMaskObservation(gym.Wrapper):
    """``obs -> {"observations": obs, "action_mask": mask}``, the mask read from
    ``info["action_mask"]`` (so wrappers that narrow the mask, like `SlotLimit`, are honoured).
    `action_masks()` stays available for sb3-contrib."""

    def __init__(self, env: gym.Env, mask_space: str = "multibinary") -> None:
        super().__init__(env)
        if mask_space not in MASK_SPACES:
            raise ValueError(f"mask_space must be one of {MASK_SPACES}, got {mask_space!r}")
        inner = env.observation_space
        if not isinstance(inner, gym.spaces.Box) or not isinstance(env.action_space, gym.spaces.Discrete):
            raise TypeError(
                "ActionMaskObservation wraps an env with a Box observation and a Discrete action space, "
                f"got {inner} / {env.action_space}"
            )
        n = int(env.action_space.n)
        self.mask_space = mask_space
        mask: gym.Space = (
            gym.spaces.MultiBinary(n)
            if mask_space == "multibinary"
            else gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        )
        self.observation_space = gym.spaces.Dict({"observations": inner, "action_mask": mask})
        self._mask_dtype = np.int8 if mask_space == "multibinary" else np.float32
        self._mask = np.ones(n, dtype=bool)

    def _wrap(self, obs: np.ndarray, info: Mapping[str, Any]) -> dict[str, np.ndarray]:
        mask = info.get("action_mask")
        if mask is None:
            mask = self.env.get_wrapper_attr("action_masks")()
        self._mask = np.asarray(mask, dtype=bool).copy()
        return {"observations": obs, "action_mask": self._mask.astype(self._mask_dtype)}

    def reset(self, **kwargs: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self._wrap(obs, info), info

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(checked_action(self.action_space, action))
        return self._wrap(obs, info), reward, terminated, truncated, info

    def peek(self, action: Any) -> Any:
        """The wrapped env's `peek`, after the same action check as `step`."""
        return self.env.get_wrapper_attr("peek")(checked_action(self.action_space, action))

    def action_masks(self) -> np.ndarray:
        """The current mask (sb3-contrib's convention), as the observation carries it."""
        return self._mask.copy()


def make_masked_env(config: Mapping[str, Any] | None = None) -> gym.Env:
    """Env creator for RLlib / TorchRL / Tianshou: ``gymnasium.make(config["env_id"], **rest)``
    wrapped in `ActionMaskObservation`.

    ``config`` (RLlib passes its ``env_config``, an `EnvContext`) may hold ``env_id`` (default
    ``"cm_gym/SQL-v0"``), ``mask_space`` ("multibinary" or "box") and any env keyword argument
    (``store``, ``tasks``, ``max_decisions``, ...). RLlib's own keys (``worker_index``,
    ``num_envs``, ...) are attributes of the `EnvContext`, not items, so they do not leak in.
    """
    from cm_gym.domains.catalog import load_builtin_domains

    load_builtin_domains()  # registers the cm_gym/* ids in this process (e.g. a Ray worker)

    kwargs = dict(config or {})
    env_id = kwargs.pop("env_id", "cm_gym/SQL-v0")
    mask_space = kwargs.pop("mask_space", "multibinary")
    kwargs.pop("num_envs", None)  # RLlib's vector entry point adds it
    return ActionMaskObservation(gym.make(env_id, **kwargs), mask_space=mask_space)
