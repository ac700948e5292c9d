"""The common frame of the selectors the field has proposed (issue 34): learn on the training
stream with the store frozen, then act greedily and frozen on held-out tasks.

A `LearnedSelector` has SB3's ``predict`` like every baseline, plus ``fit(env, task_ids,
total_decisions=...)``: it plays episodes over the training tasks (a seeded shuffle per pass,
cycling until `total_decisions` decisions, the budget cm_gym gives its masked DQN), choosing with
its exploration rule (`explore`) and learning from each decision's reward and info (`observe`)
and from each finished episode (`end_episode`). The store is only read: nothing is written to it,
exactly as the protocol trains every selector. Evaluation uses `greedy` (no exploration).

Some published policies need more than z_t. MemRL keeps a value per *record*, and Memento's
classifier scores (task, record) pairs; the observation carries the retrieved records' statistics
but not their identity or text. Those policies set ``uses_context = True`` and read
``env.unwrapped.decision_context()`` (`cm_gym.envs._observation`): the retrieved record ids and
contents, the query and the draft — what a deployed system knows, never the reference. At
evaluation they read it from the env the protocol passes their factory (`bound_to` rebinds a
policy to another env, e.g. the prefetching one); they work on a single Gymnasium env, not a
VecEnv. Policies that only read z_t (LinUCB, Thompson sampling) work anywhere.

The single action space only (Discrete(5): skip or one slot): the published rules choose one
record or none.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agents.baselines import BaselinePolicy
from cm_gym.envs.features import (
    BUDGET,
    N_SLOTS,
    SLOT_FEATURES,
    VALIDITY_INDICES,
    mask_from_observation,
    slot,
)

logger = logging.getLogger(__name__)

#: the per-slot features a bandit or classifier reads: every slot feature but validity (which the
#: mask already says), in `SLOT_FEATURES` order
SLOT_INPUTS = tuple(f for f in SLOT_FEATURES if f != "validity")
#: the index of the relevance (retrieval cosine) inside a slot's features
RELEVANCE = SLOT_FEATURES.index("relevance")


def slot_inputs(obs: np.ndarray, j: int) -> np.ndarray:
    """Slot `j`'s features without validity (6 dims, float64)."""
    return np.asarray(obs[slot(j)][: len(SLOT_INPUTS)], dtype=np.float64)


def budget_inputs(obs: np.ndarray) -> np.ndarray:
    """The six budget features of z_t (float64)."""
    return np.asarray(obs[BUDGET], dtype=np.float64)


def relevance(obs: np.ndarray, j: int) -> float:
    """Slot `j`'s retrieval similarity cos(φ(s), φ(q)) as the observation reports it."""
    return float(obs[slot(j)][RELEVANCE])


class LearnedSelector(BaselinePolicy):
    """Base class: override `scores` (greedy values per action, −inf where masked) and optionally
    `explore`, `observe`, `end_episode`, `finish_training` and `stats`."""

    name = "learned"
    #: whether the policy reads `decision_context()` from its env (record identity and text)
    uses_context = False
    #: whether `decision_context` should carry the records' projected embeddings
    context_vectors = False

    def __init__(
        self,
        env: Any = None,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
    ) -> None:
        super().__init__(validity_indices, action_space="single")
        self.env = env
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.training: dict[str, Any] = {}

    # -- what subclasses define ----------------------------------------------------------------
    def scores(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> np.ndarray:
        """Greedy value of each action (length 1 + N_SLOTS); masked actions are ignored."""
        raise NotImplementedError

    def explore(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> int:
        """The action while training; default: greedy."""
        return self.greedy(obs, mask, context)

    def observe(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        info: dict[str, Any],
        context: dict[str, Any] | None,
    ) -> None:
        """Learn from one training decision (the env's reward and info)."""

    def end_episode(self, info: dict[str, Any]) -> None:
        """Learn from a finished training episode (`info` of its last step)."""

    def finish_training(self) -> None:
        """Called once after the training stream (e.g. fit a classifier on the logged data)."""

    def stats(self) -> dict[str, Any]:
        """What the policy learned, as JSON data (results.json shows it under ``training``)."""
        return {}

    # -- acting --------------------------------------------------------------------------------
    def greedy(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> int:
        """The arg-max of `scores` over the valid actions; ties go to skip, then the lower slot."""
        values = np.asarray(self.scores(obs, mask, context), dtype=np.float64)[: len(mask)]
        values = np.where(mask, values, -np.inf)
        return int(np.argmax(values))

    def context_of(self, env: Any) -> dict[str, Any] | None:
        """The env's `decision_context` when this policy reads one, else None."""
        if not self.uses_context:
            return None
        if env is None:
            raise ValueError(f"{self.name} reads the retrieved records' identity: build it with env=")
        if hasattr(env, "env_method"):
            raise ValueError(f"{self.name} reads the current decision from one Gymnasium env, not a VecEnv")
        return env.unwrapped.decision_context(vectors=self.context_vectors)

    def bound_to(self, env: Any) -> LearnedSelector:
        """A shallow copy that reads its context from `env` (same learned parameters)."""
        other = copy.copy(self)
        other.env = env
        return other

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, None]:
        """Greedy actions for one observation (0-d array) or a batch (a batch needs a policy that
        reads z_t only)."""
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        batch = obs[None] if single else obs
        if self.uses_context and len(batch) != 1:
            raise ValueError(f"{self.name} decides one observation at a time (it reads the env's records)")
        masks = mask_from_observation(batch, self.validity_indices)
        context = self.context_of(self.env)
        if context is not None and len(context["record_ids"]) != int(masks[0, 1:].sum()):
            raise ValueError(
                f"{self.name}: the env's decision has {len(context['record_ids'])} records, the "
                f"observation {int(masks[0, 1:].sum())}: predict on the env the policy was built with"
            )
        actions = np.array([self.greedy(o, m, context) for o, m in zip(batch, masks, strict=True)])
        return (np.array(actions[0]) if single else actions), None

    # -- learning ------------------------------------------------------------------------------
    def fit(
        self, env: Any, task_ids: Sequence[str], *, total_decisions: int, seed: int | None = None
    ) -> dict[str, Any]:
        """Learn on `task_ids` for `total_decisions` decisions (whole episodes; the last may run
        past the budget by at most max_decisions − 1). Returns (and keeps in ``self.training``)
        the decisions, episodes, seconds and `stats`."""
        if not task_ids:
            raise ValueError("fit needs at least one training task")
        if getattr(env.action_space, "n", 1 + N_SLOTS) != 1 + N_SLOTS:
            raise ValueError(f"{self.name} acts in the single action space (Discrete({1 + N_SLOTS}))")
        seed = self.seed if seed is None else int(seed)
        order_rng = np.random.default_rng(seed)
        masks_fn = env.get_wrapper_attr("action_masks")
        decisions = episodes = solved = 0
        start, cpu = time.perf_counter(), time.process_time()
        while decisions < total_decisions:
            for task_id in order_rng.permutation(list(task_ids)):
                obs, info = env.reset(seed=seed * 1_000_003 + episodes, options={"task_id": str(task_id)})
                done = False
                while not done:
                    mask = np.asarray(masks_fn(), dtype=bool)[: 1 + N_SLOTS]
                    context = self.context_of(env)
                    action = self.explore(obs, mask, context)
                    nxt, reward, terminated, truncated, info = env.step(action)
                    self.observe(obs, action, float(reward), info, context)
                    obs, done = nxt, bool(terminated or truncated)
                    decisions += 1
                self.end_episode(info)
                episodes += 1
                solved += bool(info.get("solved"))
                if decisions >= total_decisions:
                    break
        self.finish_training()
        self.training = {
            "policy": self.name,
            "seed": seed,
            "decisions": decisions,
            "episodes": episodes,
            "train_solved_rate": solved / max(1, episodes),
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu,
            **self.stats(),
        }
        logger.info("%s trained: %d decisions, %d episodes", self.name, decisions, episodes)
        return self.training

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed})"
