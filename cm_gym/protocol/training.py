"""Rollouts and selector training with checkpoint selection (paper Appendix C.2).

`run_episodes` plays a policy greedily over a fixed list of task ids (one episode each) and returns
the SPEC §8 episode counters. `CheckpointSelector` is an SB3 callback that scores the policy on
the selector-validation subset every `every` decisions and keeps the checkpoint with the highest
mean return; it also writes the TensorBoard groups ``charts/``, ``memory/`` and ``llm/``
(every key with its meaning: docs/tensorboard.md).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from cm_gym.core.progress import progress_bar
from cm_gym.core.types import CmGymError
from cm_gym.envs.metrics import EpisodeCounters

logger = logging.getLogger(__name__)


class Policy(Protocol):
    """Anything with SB3's `predict` (MaskedDQN, the baselines, your own)."""

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]: ...


class MaskedActionError(CmGymError):
    """A policy picked a masked action while evaluated with ``on_masked="error"``."""


def wants_masks(policy: Any) -> bool:
    """True when the policy's ``predict`` takes ``action_masks=`` (sb3-contrib's MaskablePPO)."""
    try:
        return "action_masks" in inspect.signature(policy.predict).parameters
    except (TypeError, ValueError):
        return False


def run_episodes(
    env: gym.Env, policy: Policy, task_ids: Sequence[str], *, seed: int = 0, on_masked: str = "count"
) -> list[dict[str, Any]]:
    """Play one greedy episode per task id and return each episode's counters (as dicts).

    The env is reset with ``options={"task_id": ...}`` so every policy sees the same tasks in the
    same order; nothing is written to the store. A policy whose ``predict`` takes ``action_masks``
    gets the env's mask. The action goes to the env as returned (the env refuses anything that is
    not an integer of its action space); a masked pick runs as skip and is counted in the
    episode's ``invalid_actions``, or raises `MaskedActionError` with ``on_masked="error"``.
    """
    masks_fn = env.get_wrapper_attr("action_masks")
    give_masks = wants_masks(policy)
    episodes: list[dict[str, Any]] = []
    for i, task_id in enumerate(task_ids):
        obs, info = env.reset(seed=seed + i, options={"task_id": task_id})
        counters = EpisodeCounters(task_id=str(info.get("task_id", task_id)))
        done = False
        while not done:
            mask = masks_fn()
            if give_masks:
                action, _ = policy.predict(obs, deterministic=True, action_masks=mask)
            else:
                action, _ = policy.predict(obs, deterministic=True)
            action = np.asarray(action)
            if on_masked == "error" and action.size == 1 and action.dtype.kind in "iu":
                a = int(action.reshape(-1)[0])
                if 0 <= a < len(mask) and not mask[a]:
                    raise MaskedActionError(
                        f"the policy picked masked action {a} on task {task_id} (valid: {np.flatnonzero(mask).tolist()})"
                    )
            obs, reward, terminated, truncated, info = env.step(
                action.reshape(-1)[0] if action.size == 1 else action
            )
            counters.update(info, float(reward))
            done = terminated or truncated
        episodes.append(counters.as_dict())
    return episodes


def mean_return(episodes: Sequence[dict[str, Any]]) -> float:
    return float(np.mean([e["episode_return"] for e in episodes])) if episodes else 0.0


class CheckpointSelector(BaseCallback):
    """Every `every` decisions: score the greedy policy on the validation tasks, save it, and keep
    the best (highest mean validation return) as ``best.zip`` in `out_dir`. Any learner whose
    ``model`` has ``predict``, ``save`` and ``logger`` can drive it through `evaluate_checkpoint`
    (the RLlib path does, with folders: `checkpoint_suffix` "")."""

    checkpoint_suffix = ".zip"

    def __init__(
        self, val_env: gym.Env, val_task_ids: Sequence[str], out_dir: Path, every: int = 250
    ) -> None:
        super().__init__(verbose=0)
        self.val_env, self.val_task_ids, self.out_dir, self.every = (
            val_env,
            list(val_task_ids),
            out_dir,
            every,
        )
        self.best_return = -np.inf
        self.best_step = -1
        self.history: list[dict[str, float]] = []
        self._returns: dict[int, np.ndarray] = {}  # per-task validation returns per checkpoint
        self._ep = EpisodeCounters()

    @property
    def best_path(self) -> Path:
        return self.out_dir / f"best{self.checkpoint_suffix}"

    def _on_step(self) -> bool:
        for info, reward, done in zip(
            self.locals["infos"], self.locals["rewards"], self.locals["dones"], strict=False
        ):
            self._ep.update(info, float(reward))
            if done:
                self._log_episode(self._ep)
                self._ep = EpisodeCounters()
        if self.num_timesteps % self.every == 0:
            self.evaluate_checkpoint()
        return True

    def _log_episode(self, ep: EpisodeCounters) -> None:
        self.logger.record_mean("charts/episodic_return", ep.episode_return)
        self.logger.record_mean("charts/solved", float(ep.solved))
        self.logger.record_mean("charts/episode_decisions", ep.decisions)
        self.logger.record_mean("memory/selected_uses", ep.selected_uses)
        self.logger.record_mean("memory/helpful_uses", ep.helpful_uses)
        self.logger.record_mean("memory/harmful_uses", ep.harmful_uses)
        if ep.retrieval_opportunities:
            self.logger.record_mean("memory/coverage", ep.retrieval_with_records / ep.retrieval_opportunities)
        self.logger.record_mean("llm/tokens_per_task", ep.tokens)
        self.logger.record_mean("llm/evaluator_calls_per_task", ep.evaluator_calls)

    def selection_noise(self) -> dict[str, float | int | None]:
        """How much the checkpoint choice can be trusted: the standard error of the best
        checkpoint's mean validation return, the spread of mean returns across checkpoints, and
        the paired (same tasks) difference best − runner-up with its standard error."""
        steps = sorted(self._returns, key=lambda k: float(self._returns[k].mean()), reverse=True)
        if not steps:
            return {"validation_tasks": len(self.val_task_ids)}
        best = self._returns[steps[0]]
        n = len(best)
        out: dict[str, float | int | None] = {
            "validation_tasks": n,
            "best_return_se": float(best.std(ddof=1) / np.sqrt(n)) if n > 1 else None,
            "checkpoint_spread": float(
                max(r.mean() for r in self._returns.values()) - min(r.mean() for r in self._returns.values())
            ),
        }
        if len(steps) > 1 and n > 1:
            diff = best - self._returns[steps[1]]
            out.update(
                runner_up_step=int(steps[1]),
                best_minus_runner_up=float(diff.mean()),
                paired_se=float(diff.std(ddof=1) / np.sqrt(n)),
            )
        return out

    def evaluate_checkpoint(self) -> float:
        """Score the current greedy policy on the validation subset; keep it if it is the best."""
        episodes = run_episodes(self.val_env, self.model, self.val_task_ids)
        value = mean_return(episodes)
        solved = float(np.mean([e["solved"] for e in episodes])) if episodes else 0.0
        returns = np.array([float(e["episode_return"]) for e in episodes])
        self._returns[int(self.num_timesteps)] = returns
        se = float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1 else float("nan")
        self.history.append(
            {
                "step": float(self.num_timesteps),
                "val_return": value,
                "val_return_se": se,
                "val_solved": solved,
            }
        )
        self.logger.record("charts/validation_return", value)
        self.logger.record("charts/validation_solved", solved)
        self.logger.dump(self.num_timesteps)  # every validation point reaches TensorBoard, the last too
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.model.save(self.out_dir / f"ckpt_{self.num_timesteps}{self.checkpoint_suffix}")
        if value > self.best_return:
            self.best_return, self.best_step = value, self.num_timesteps
            self.model.save(self.best_path)
        logger.info(
            "checkpoint %d: validation return %.3f (best %.3f @ %d)",
            self.num_timesteps,
            value,
            self.best_return,
            self.best_step,
        )
        return value


class DecisionProgress(BaseCallback):
    """SB3 callback: a `progress_bar` over ``learn``'s decisions (line-based when piped)."""

    def __init__(self, desc: str = "train", file: IO[str] | None = None, steps: int = 10) -> None:
        super().__init__()
        self.desc, self.file, self.steps, self.bar = desc, file, steps, None

    def _on_training_start(self) -> None:
        total = int(self.locals["total_timesteps"]) - int(self.model.num_timesteps)
        self.bar = progress_bar(total, self.desc, "decision", file=self.file, steps=self.steps)

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(int(self.training_env.num_envs))
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
