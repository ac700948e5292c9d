"""EpisodeMetrics: RecordEpisodeStatistics-style wrapper with the SPEC §8 counters."""

from __future__ import annotations

from collections import deque
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from cm_gym.envs._actions import checked_action
from cm_gym.envs.metrics import EpisodeCounters, summarize


class EpisodeMetrics(gym.Wrapper):
    """Accumulate each episode's solved / score / evaluator calls / failures / tokens / retrieval
    opportunities and hits / selected, helpful and harmful uses, and put them into
    ``info["episode_metrics"]`` on the step that ends the episode.

    The last `buffer_length` finished episodes are kept in `episodes`; `summary()` gives their
    SPEC §8 metrics (`cm_gym.envs.metrics.summarize`). `action_masks()` and `peek()` pass through, so
    sb3-contrib's MaskablePPO and the Oracle baseline work on the wrapped env.
    """

    def __init__(self, env: gym.Env, buffer_length: int = 10_000) -> None:
        super().__init__(env)
        self.episodes: deque[dict[str, Any]] = deque(maxlen=buffer_length)
        self._counters = EpisodeCounters()

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(**kwargs)
        self._counters = EpisodeCounters(task_id=str(info.get("task_id", "")))
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(checked_action(self.action_space, action))
        self._counters.update(info, float(reward))
        if terminated or truncated:
            info = dict(info)
            info["episode_metrics"] = self._counters.as_dict()
            self.episodes.append(info["episode_metrics"])
        return obs, reward, terminated, truncated, info

    def summary(self) -> dict[str, Any]:
        """SPEC §8 metrics over the buffered episodes."""
        return summarize(list(self.episodes))

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()

    def peek(self, action: Any) -> Any:
        return self.env.get_wrapper_attr("peek")(checked_action(self.action_space, action))
