"""What the env-API conveniences cost, as ratios to one env step measured in the same run:
rendering a decision as text and as an RGB frame, pickling an env (mid-episode) and loading it
back, and the Dict(observations, action_mask) bridge's overhead per step.

    python bench/bench_env_api.py [--benchmark SQL] [--steps 300]
"""

from __future__ import annotations

import argparse
import pickle
import time

import gymnasium as gym
import numpy as np

import cm_gym  # noqa: F401
from cm_gym.envs.wrappers import ActionMaskObservation


def _steps(env: gym.Env, n: int, dict_obs: bool = False) -> float:
    obs, info = env.reset(seed=0)
    started = time.perf_counter()
    for _ in range(n):
        mask = obs["action_mask"] if dict_obs else info["action_mask"]
        obs, _, term, trunc, info = env.step(int(np.flatnonzero(mask)[-1]))
        if term or trunc:
            obs, info = env.reset()
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="SQL")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    env_id = f"cm_gym/{args.benchmark}-v0"

    plain = gym.make(env_id, render_mode="rgb_array")
    wrapped = ActionMaskObservation(gym.make(env_id))
    for _ in range(2):  # the second, warm round of each is reported (process-level caches filled)
        step = _steps(plain, args.steps)
        bridged = _steps(wrapped, args.steps, dict_obs=True)

    ansi = gym.make(env_id, render_mode="ansi")
    ansi.reset(seed=0)
    t = time.perf_counter()
    for _ in range(200):
        ansi.render()
    text = (time.perf_counter() - t) / 200
    plain.reset(seed=0)
    t = time.perf_counter()
    for _ in range(200):
        frame = plain.render()
    rgb = (time.perf_counter() - t) / 200

    plain.step(0)
    t = time.perf_counter()
    for _ in range(20):
        blob = pickle.dumps(plain)
    dump = (time.perf_counter() - t) / 20
    t = time.perf_counter()
    for _ in range(20):
        pickle.loads(blob)
    load = (time.perf_counter() - t) / 20

    print(f"{env_id}: one env step {step * 1e3:.2f} ms (mean of {args.steps}, highest valid slot)")
    print(f"  render ansi           {text * 1e3:7.3f} ms  = {text / step:5.2f} x step")
    print(f"  render rgb_array      {rgb * 1e3:7.3f} ms  = {rgb / step:5.2f} x step  (frame {frame.shape})")
    print(f"  Dict mask bridge step {bridged * 1e3:7.3f} ms  = {bridged / step:5.2f} x step")
    print(
        f"  pickle.dumps          {dump * 1e3:7.3f} ms  = {dump / step:5.2f} x step  ({len(blob) / 1e3:.0f} kB)"
    )
    print(
        f"  pickle.loads          {load * 1e3:7.3f} ms  = {load / step:5.2f} x step  (rebuilds domain, evaluator, LLM)"
    )


if __name__ == "__main__":
    main()
