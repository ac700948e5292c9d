"""Env throughput: decisions per second of MemorySelectionEnv on the generated SQL benchmark with
the simulated LLM — single process and a 2-process vector env — and the share of time spent in
the evaluator / LLM / retrieval / features (the env's `profile=True` accumulators).

    python bench/bench_env.py [--benchmark SQL] [--decisions 3000] [--store PATH]
    python bench/bench_env.py --compare 5445140 [--ids cm_gym/SQL-v0 ...] [--decisions 2000] [--pairs 4]
    python bench/bench_env.py --series 6 [--compare 5445140] [--ids ...] [--decisions 2000]

`--compare REV` times this tree against commit REV instead, interleaved A B A B, each from a fresh
`gym.make` over its first `--decisions` decisions, in decisions per CPU-second, with the ratio per
pair and its median (`bench/_env_compare.py`). `--series N` runs processes 1..N on one fresh
cache, each from a fresh `gym.make` over its first `--decisions` decisions: the first process on a
machine, the second, … (with `--compare REV`, REV's series too, interleaved, and the ratio).

Target (issue 5): ≥ 500 decisions/s per core. The policy is uniformly random over valid actions,
so both skips and record revisions are exercised.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import gymnasium as gym
import numpy as np
from _env_compare import children_cpu  # bench/ is on sys.path when run as a script

import cm_gym  # noqa: F401  (registers the env ids)
from cm_gym.envs.selection import MemorySelectionEnv


def make_env(benchmark: str, store: str | None, profile: bool = False) -> MemorySelectionEnv:
    return MemorySelectionEnv(benchmark=benchmark, store=store, tasks="train", profile=profile)


def run_single(env: MemorySelectionEnv, decisions: int, seed: int = 0) -> tuple[float, int, int, float]:
    """(wall seconds, decisions, episodes, CPU seconds of this process and its checking workers)
    of a random-valid rollout. CPU seconds give a per-core rate that other processes on a shared
    machine do not distort."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    episodes = 0
    cpu = time.process_time() + children_cpu()
    start = time.perf_counter()
    for _ in range(decisions):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, _, term, trunc, info = env.step(action)
        if term or trunc:
            episodes += 1
            obs, info = env.reset()
    return time.perf_counter() - start, decisions, episodes, time.process_time() + children_cpu() - cpu


def run_vector(
    benchmark: str, store: str | None, decisions: int, n_envs: int = 2, warmup: int = 500
) -> float:
    """Decisions per second (all processes together) of an AsyncVectorEnv, after `warmup`
    decisions per process (the same warm-up the single-process figures get)."""
    fns = [functools.partial(make_env, benchmark, store) for _ in range(n_envs)]
    envs = gym.vector.AsyncVectorEnv(fns, context="fork")
    rng = np.random.default_rng(0)
    _, infos = envs.reset(seed=list(range(n_envs)))
    steps = decisions // n_envs
    for _ in range(warmup):  # warm-up (LRU caches, first SQLite connections)
        masks = infos["action_mask"]
        _, _, _, _, infos = envs.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
    start = time.perf_counter()
    for _ in range(steps):
        masks = infos["action_mask"]
        _, _, _, _, infos = envs.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
    elapsed = time.perf_counter() - start
    envs.close()
    return steps * n_envs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="SQL")
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=500, help="decisions before timing (caches warm up)")
    parser.add_argument(
        "--store", default=None, help="frozen store (default: the benchmark's default snapshot)"
    )
    parser.add_argument("--compare", metavar="REV", default=None, help="time this tree against commit REV")
    parser.add_argument("--ids", nargs="+", default=["cm_gym/SQL-v0"], help="env ids for --compare")
    parser.add_argument("--pairs", type=int, default=4, help="A/B pairs for --compare")
    parser.add_argument(
        "--series", type=int, metavar="N", default=0,
        help="processes 1..N on a fresh cache, each from a fresh gym.make (with --compare: REV's too, interleaved)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.series:
        from _env_compare import series

        series(args.compare, args.ids, args.decisions, args.series)
        return
    if args.compare:
        from _env_compare import compare

        compare(args.compare, args.ids, args.decisions, args.pairs)
        return

    t0 = time.perf_counter()
    env = make_env(args.benchmark, args.store, profile=True)
    store = str(env.store.path)
    print(
        f"env ready in {time.perf_counter() - t0:.1f}s: {args.benchmark}, {len(env.tasks)} train tasks, "
        f"{len(env.store)} records in {store}"
    )
    run_single(env, args.warmup)
    env.timings.reset()
    seconds, n, episodes, _ = run_single(env, args.decisions, seed=1)
    timings = env.timings.as_dict()
    print(
        f"single process (profiled): {n / seconds:8.1f} decisions/s  ({n} decisions, {episodes} episodes, {seconds:.2f}s)"
    )
    share = timings["share"]
    print(
        "time share:  "
        + "  ".join(f"{k} {100 * v:5.1f}%" for k, v in share.items())
        + f"  other {100 * (1 - sum(share.values())):5.1f}%"
    )
    print("calls:       " + "  ".join(f"{k} {v}" for k, v in sorted(timings["calls"].items())))

    plain = make_env(args.benchmark, store, profile=False)
    run_single(plain, args.warmup)
    seconds, n, _, cpu = run_single(plain, args.decisions, seed=1)
    print(f"single process (plain):    {n / seconds:8.1f} decisions/s wall, {n / cpu:8.1f} per CPU-second")

    cores = os.cpu_count() or 1
    rate = run_vector(args.benchmark, store, args.decisions, n_envs=2, warmup=args.warmup)
    print(
        f"2-process AsyncVectorEnv:  {rate:8.1f} decisions/s total, {rate / 2:8.1f} per process "
        f"({cores} cores on this machine)"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"target: >= 500 decisions/s per core   (1-min load average during the run: {load:.2f})")


if __name__ == "__main__":
    main()
