"""Masked DQN training speed as a ratio to plain SB3 DQN, same env, same run, same settings.

    python bench/bench_masked_dqn.py [--benchmark SQL] [--steps 2000] [--repeats 3]

Both algorithms use the paper's Table 3 settings and train for `--steps` decisions on the
generated SQL benchmark with the simulated LLM; runs alternate (plain, masked, plain, ...) and the
median time of each is compared. Also reported: the same ratio on a precomputed-observation env
(algorithm cost alone, no LLM / evaluator). Target (issue 5): ratio ≥ 0.8.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import DQN

import cm_gym  # noqa: F401
from cm_gym.agents.masked_dqn import TABLE3, TABLE3_POLICY_KWARGS, MaskedDQN
from cm_gym.envs.features import OBS_DIM
from cm_gym.envs.selection import MemorySelectionEnv


class ReplayEnv(gym.Env):
    """Replays recorded (obs, mask) pairs with a constant reward: the algorithm's cost alone."""

    def __init__(self, observations: np.ndarray) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.obs, self.i = observations, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self.obs[self.i % len(self.obs)], {}

    def step(self, action: int):
        self.i += 1
        return self.obs[self.i % len(self.obs)], -0.1, self.i % 3 == 0, False, {}


def timed(algo: type, env: gym.Env, steps: int, seed: int) -> float:
    kwargs = dict(TABLE3)
    policy_kwargs = dict(TABLE3_POLICY_KWARGS)
    if algo is DQN:
        model = DQN("MlpPolicy", env, policy_kwargs=policy_kwargs, seed=seed, **kwargs)
    else:
        model = MaskedDQN(env=env, seed=seed)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    return time.perf_counter() - start


def ratio(make: Any, steps: int, repeats: int) -> tuple[float, float, float]:
    plain, masked = [], []
    for r in range(repeats):
        plain.append(timed(DQN, make(), steps, r))
        masked.append(timed(MaskedDQN, make(), steps, r))
    p, m = statistics.median(plain), statistics.median(masked)
    return steps / p, steps / m, p / m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="SQL")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest for a 64x64 MLP)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    probe = MemorySelectionEnv(benchmark=args.benchmark, tasks="train")
    store = str(probe.store.path)

    def make_env() -> MemorySelectionEnv:
        return MemorySelectionEnv(benchmark=args.benchmark, store=store, tasks="train")

    timed(DQN, make_env(), 300, 99)  # warm-up: imports, caches, first SQLite connections
    p_rate, m_rate, r = ratio(make_env, args.steps, args.repeats)
    print(f"{args.benchmark} env, {args.steps} decisions x {args.repeats} runs (median):")
    print(f"  plain DQN  {p_rate:8.1f} decisions/s")
    print(f"  MaskedDQN  {m_rate:8.1f} decisions/s")
    print(f"  ratio masked/plain = {r:.3f}   (target >= 0.8)")

    rng = np.random.default_rng(0)
    obs = []
    o, info = probe.reset(seed=0)
    for _ in range(300):
        obs.append(o)
        o, _, term, trunc, info = probe.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if term or trunc:
            o, info = probe.reset()
    recorded = np.stack(obs)
    p_rate, m_rate, r = ratio(lambda: ReplayEnv(recorded), args.steps, args.repeats)
    print("algorithm alone (replayed observations, no LLM/evaluator):")
    print(f"  plain DQN  {p_rate:8.1f} steps/s   MaskedDQN {m_rate:8.1f} steps/s   ratio = {r:.3f}")


if __name__ == "__main__":
    main()
