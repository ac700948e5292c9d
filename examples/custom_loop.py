"""A plain training loop on the memory-selection env, no RL library: tabular-free ε-greedy
Q-learning with a linear Q over the 98-dim observation, masking from ``info["action_mask"]``.

Run:  python examples/custom_loop.py [--steps 2000] [--benchmark SQL]
It shows the whole contract a custom algorithm needs: reset → (obs, info["action_mask"]) → pick a
valid action → step → reward / terminated → update.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import cm_gym  # noqa: F401  (registers the cm_gym/* env ids)
from cm_gym.envs.features import N_ACTIONS, OBS_DIM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="SQL")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    env = gym.make(f"cm_gym/{args.benchmark}-v0")
    rng = np.random.default_rng(args.seed)
    w = np.zeros((N_ACTIONS, OBS_DIM + 1))  # linear Q(z, a) = w[a] · [z, 1]
    gamma, lr = 0.95, 0.01

    def q(obs: np.ndarray) -> np.ndarray:
        return w @ np.append(obs, 1.0)

    obs, info = env.reset(seed=args.seed)
    returns, ep_return = [], 0.0
    for t in range(args.steps):
        mask = info["action_mask"]
        eps = max(0.05, 0.30 - 0.25 * t / (0.5 * args.steps))
        if rng.random() < eps:
            action = int(rng.choice(np.flatnonzero(mask)))  # random *valid* action
        else:
            action = int(np.argmax(np.where(mask, q(obs), -np.inf)))  # greedy over valid actions
        next_obs, reward, terminated, truncated, info = env.step(action)
        ep_return += float(reward)
        next_q = np.where(info["action_mask"], q(next_obs), -np.inf).max()  # masked target max
        target = reward + (0.0 if terminated else gamma * next_q)
        x = np.append(obs, 1.0)
        w[action] += lr * (target - w[action] @ x) * x
        obs = next_obs
        if terminated or truncated:
            returns.append(ep_return)
            ep_return = 0.0
            obs, info = env.reset()
    print(f"{len(returns)} episodes; mean return of the last 50: {np.mean(returns[-50:]):+.3f}")


if __name__ == "__main__":
    main()
