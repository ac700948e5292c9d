"""Off-policy evaluation of a selector from logged decisions, checked against the exact value the
opt-in counterfactuals give (issue 34).

The estimand is the *per-decision* (contextual-bandit) value of a target policy π on the logged
decisions: V(π) = mean over logged decisions x_i of E_{a~π(·|x_i)} r(x_i, a), the reward the env
would have paid had π chosen at that decision — later decisions are not re-played, so it is the
one-step value on the behaviour policy's state distribution, not an episode return. With
``counterfactuals=True`` the env gives r(x_i, a) for every valid a, so V(π) is known exactly
(`true_value`); the estimators see only the logged action's reward:

- `ips` — inverse propensity scoring (Horvitz & Thompson 1952): mean of π(a_i|x_i)/μ(a_i|x_i)·r_i.
- `doubly_robust` — Dudík, Langford & Li, "Doubly Robust Policy Evaluation and Learning", ICML
  2011, Eq. 2: mean of Σ_a π(a|x_i)·r̂(x_i, a) + π(a_i|x_i)/μ(a_i|x_i)·(r_i − r̂(x_i, a_i)), with
  `reward_model` r̂ (default: the logged mean reward of skip and of using a slot, fitted on the
  same log — the simplest direct method; any callable r̂(obs, action) can be passed).

Each returns an `Estimate`: the value and a normal-approximation 95% CI from the per-decision
terms (their standard error; ``Z95 = 1.959964``, the 97.5% normal quantile). `log_uniform` plays a
uniformly random valid behaviour policy (μ = 1/#valid, skip included) on an env and keeps, per
decision, what the estimators and `true_value` need. A target policy is given as probabilities
per decision and action (``(n, n_actions)``, rows summing to 1 over valid actions), or as one
action per decision (deterministic); `policy_actions` gets those from any policy with SB3's
``predict`` that reads z_t alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Z95 = 1.959964


@dataclass(frozen=True)
class LoggedDecision:
    """One logged decision: z_t, its mask, the behaviour's action and its probability, the reward
    paid, and the counterfactual table of the env (action → its reward etc.; empty without)."""

    obs: np.ndarray
    mask: np.ndarray
    action: int
    propensity: float
    reward: float
    counterfactual: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    """A value with its 95% CI (normal approximation over decisions)."""

    value: float
    se: float
    n: int

    @property
    def lo(self) -> float:
        return self.value - Z95 * self.se

    @property
    def hi(self) -> float:
        return self.value + Z95 * self.se

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "se": self.se, "lo": self.lo, "hi": self.hi, "n": self.n}


def _estimate(terms: np.ndarray) -> Estimate:
    n = len(terms)
    se = float(terms.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return Estimate(float(terms.mean()), se, n)


def log_uniform(
    env: Any, task_ids: Sequence[str], *, n_decisions: int, seed: int = 0
) -> list[LoggedDecision]:
    """Play a uniformly random valid policy over `task_ids` (cycling) until `n_decisions`
    decisions; the env should be made with ``counterfactuals=True`` for `true_value`."""
    rng = np.random.default_rng(seed)
    logged: list[LoggedDecision] = []
    episode = 0
    while len(logged) < n_decisions:
        task_id = task_ids[episode % len(task_ids)]
        obs, info = env.reset(seed=seed + episode, options={"task_id": task_id})
        episode += 1
        done = False
        while not done and len(logged) < n_decisions:
            mask = np.asarray(info["action_mask"], dtype=bool)
            valid = np.flatnonzero(mask)
            action = int(rng.choice(valid))
            nxt, reward, terminated, truncated, info = env.step(action)
            table = {int(k): v for k, v in (info.get("counterfactual") or {}).items()}
            logged.append(
                LoggedDecision(np.asarray(obs), mask, action, 1.0 / len(valid), float(reward), table)
            )
            obs, done = nxt, bool(terminated or truncated)
    return logged


def policy_actions(policy: Any, logged: Sequence[LoggedDecision]) -> np.ndarray:
    """The greedy action of `policy` (SB3's ``predict``, reading z_t) at each logged decision."""
    return np.array(
        [int(np.asarray(policy.predict(d.obs, deterministic=True)[0]).reshape(-1)[0]) for d in logged]
    )


def target_probabilities(logged: Sequence[LoggedDecision], target: np.ndarray) -> np.ndarray:
    """``(n, n_actions)`` probabilities from one action per decision or from probabilities; a
    masked action's probability must be 0."""
    n, n_actions = len(logged), len(logged[0].mask)
    probs = np.asarray(target, dtype=np.float64)
    if probs.ndim == 1:
        one_hot = np.zeros((n, n_actions))
        one_hot[np.arange(n), probs.astype(int)] = 1.0
        probs = one_hot
    masks = np.stack([d.mask for d in logged])
    if probs.shape != (n, n_actions) or np.any(probs[~masks] > 0) or not np.allclose(probs.sum(axis=1), 1.0):
        raise ValueError(
            "target: one valid action per decision, or (n, n_actions) probabilities over valid actions"
        )
    return probs


def uniform_target(logged: Sequence[LoggedDecision]) -> np.ndarray:
    """The uniformly random valid policy's probabilities (the Random baseline as a target)."""
    masks = np.stack([d.mask for d in logged]).astype(np.float64)
    return masks / masks.sum(axis=1, keepdims=True)


def true_value(logged: Sequence[LoggedDecision], target: np.ndarray) -> Estimate:
    """V(π) from the counterfactual rewards (exact per decision; the CI is over decisions)."""
    probs = target_probabilities(logged, target)
    if any(not d.counterfactual for d in logged):
        raise ValueError("true_value needs decisions logged with counterfactuals=True")
    terms = np.array(
        [
            sum(p * d.counterfactual[a]["reward"] for a, p in enumerate(row) if p > 0)
            for d, row in zip(logged, probs, strict=True)
        ]
    )
    return _estimate(terms)


def ips(logged: Sequence[LoggedDecision], target: np.ndarray) -> Estimate:
    """Inverse propensity scoring (see the module doc)."""
    probs = target_probabilities(logged, target)
    terms = np.array([row[d.action] / d.propensity * d.reward for d, row in zip(logged, probs, strict=True)])
    return _estimate(terms)


def mean_reward_model(logged: Sequence[LoggedDecision]) -> Callable[[np.ndarray, int], float]:
    """r̂(obs, a): the logged mean reward of skip (a = 0) and of using any slot (a > 0)."""
    skip = [d.reward for d in logged if d.action == 0]
    use = [d.reward for d in logged if d.action > 0]
    means = (float(np.mean(skip)) if skip else 0.0, float(np.mean(use)) if use else 0.0)
    return lambda obs, a: means[int(a > 0)]


def doubly_robust(
    logged: Sequence[LoggedDecision],
    target: np.ndarray,
    reward_model: Callable[[np.ndarray, int], float] | None = None,
) -> Estimate:
    """The doubly robust estimate (Dudík et al. 2011; see the module doc)."""
    probs = target_probabilities(logged, target)
    model = reward_model or mean_reward_model(logged)
    terms = []
    for d, row in zip(logged, probs, strict=True):
        direct = sum(p * model(d.obs, a) for a, p in enumerate(row) if p > 0)
        terms.append(direct + row[d.action] / d.propensity * (d.reward - model(d.obs, d.action)))
    return _estimate(np.array(terms))
