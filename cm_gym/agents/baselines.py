"""Baseline selectors with SB3's ``predict`` signature, for comparison with a trained policy.

- `AlwaysSkip`   — never uses memory (the "None" row: the base agent alone).
- `TopOne`       — always the top-ranked retrieved record (slot 1) when there is one.
- `TopTwo`       — pair action space only: the two top-ranked records (slot 1, then slot 2) when
  both exist, else slot 1, else skip.
- `RandomValid`  — a seeded uniformly random valid action (skip included).
- `Oracle`       — ANALYSIS-ONLY UPPER BOUND: it *peeks*, evaluating every valid option on a fork
  of the current state through ``env.peek(action)`` and picking the best score. No deployable
  selector can do this; never report it as a method.

All of them read the mask from the observation (`cm_gym.envs.features.mask_from_observation`), accept a
single observation or a batch, and return ``(actions, None)``. ``action_space="pairs"`` makes them
act in the opt-in pair action space (Discrete(17)): `RandomValid` then draws among valid singles
and pairs, `Oracle` peeks every valid single and pair; `AlwaysSkip` and `TopOne` act as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.envs.features import VALIDITY_INDICES, mask_from_observation, n_actions, pair_action


class BaselinePolicy:
    """Common SB3-like interface: ``predict(obs, state, episode_start, deterministic)``."""

    name: str = "baseline"

    def __init__(
        self, validity_indices: Sequence[int] = VALIDITY_INDICES, *, action_space: str = "single"
    ) -> None:
        self.validity_indices = tuple(validity_indices)
        n_actions(action_space)  # refuses an unknown action space
        self.action_space = action_space

    def _choose(self, masks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, None]:
        """Actions for one observation (returns a 0-d array) or a batch (returns shape (n,))."""
        obs = np.asarray(observation)
        single = obs.ndim == 1
        masks = mask_from_observation(
            obs[None] if single else obs, self.validity_indices, pairs=self.action_space == "pairs"
        )
        actions = self._choose(masks).astype(np.int64)
        return (np.array(actions[0]) if single else actions), None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AlwaysSkip(BaselinePolicy):
    """Action 0 everywhere: the base agent without memory ("None")."""

    name = "none"

    def _choose(self, masks: np.ndarray) -> np.ndarray:
        return np.zeros(len(masks), dtype=np.int64)


class TopOne(BaselinePolicy):
    """Use the top-ranked retrieved record (slot 1) whenever it is valid, else skip."""

    name = "top1"

    def _choose(self, masks: np.ndarray) -> np.ndarray:
        return np.where(masks[:, 1], 1, 0)


class TopTwo(BaselinePolicy):
    """Pair action space: the two top-ranked records, slot 1 then slot 2, when both are valid;
    else slot 1 alone when valid; else skip."""

    name = "top2"

    def __init__(self, validity_indices: Sequence[int] = VALIDITY_INDICES, *, action_space: str = "pairs"):
        if action_space != "pairs":
            raise ValueError("TopTwo acts in the pair action space (action_space='pairs')")
        super().__init__(validity_indices, action_space=action_space)

    def _choose(self, masks: np.ndarray) -> np.ndarray:
        pair = pair_action(1, 2)
        return np.where(masks[:, pair], pair, np.where(masks[:, 1], 1, 0))


class RandomValid(BaselinePolicy):
    """A uniformly random valid action (skip included), reproducible from `seed`."""

    name = "random"

    def __init__(
        self,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        *,
        action_space: str = "single",
    ) -> None:
        super().__init__(validity_indices, action_space=action_space)
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def _choose(self, masks: np.ndarray) -> np.ndarray:
        return np.array([self.rng.choice(np.flatnonzero(row)) for row in masks], dtype=np.int64)

    def __repr__(self) -> str:
        return f"RandomValid(seed={self.seed})"


class Oracle(BaselinePolicy):
    """ANALYSIS-ONLY UPPER BOUND that peeks at outcomes; not a method.

    For each valid option it calls ``peek(action) -> Outcome`` on the env (which evaluates that
    option on a fork without touching counters or state) and picks the highest
    ``(solved, score)``; ties go to skip, then to the lowest slot. `env` is a Gymnasium env (the
    call goes to ``env.unwrapped.peek``) or an SB3 VecEnv (``env.env_method("peek", …)`` per
    sub-env, matching the batch order of the observations).
    """

    name = "oracle"

    def __init__(
        self, env: Any, validity_indices: Sequence[int] = VALIDITY_INDICES, *, action_space: str = "single"
    ) -> None:
        super().__init__(validity_indices, action_space=action_space)
        self.env = env
        self.peeks = 0

    def _peek(self, index: int, action: int) -> Any:
        self.peeks += 1
        if hasattr(self.env, "env_method"):
            return self.env.env_method("peek", action, indices=[index])[0]
        if index != 0:
            raise ValueError("Oracle over a single Gymnasium env got a batch of observations")
        return self.env.unwrapped.peek(action)

    def _choose(self, masks: np.ndarray) -> np.ndarray:
        out = np.zeros(len(masks), dtype=np.int64)
        for i, row in enumerate(masks):
            best_key: tuple[float, float] | None = None
            for action in np.flatnonzero(row):
                outcome = self._peek(i, int(action))
                key = (float(outcome.solved), float(outcome.score))
                if best_key is None or key > best_key:
                    best_key, out[i] = key, int(action)
        return out


BASELINES: dict[str, type[BaselinePolicy]] = {
    "none": AlwaysSkip,
    "top1": TopOne,
    "random": RandomValid,
    "oracle": Oracle,
}
#: Baselines that exist only in the opt-in pair action space.
PAIR_BASELINES: dict[str, type[BaselinePolicy]] = {"top2": TopTwo}
