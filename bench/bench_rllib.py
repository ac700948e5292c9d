"""RLlib PPO throughput on the masked selection env: env steps (selector decisions) per second with
1, 2 and 4 env runners, and the ratio to 1 runner, measured in the same run.

    python bench/bench_rllib.py [--runners 1 2 4] [--iterations 3] [--batch 256]

Setup: SQL, ReAct, simulated LLM (as `cm-gym train`'s defaults), a store built on 16 T_build tasks
and frozen, PPO with the training batch of ``--batch`` decisions per iteration (the same
`algorithm_config` as ``cm-gym train --algo rllib-ppo``). One warm-up iteration per setting (env
runners start, Ray registers the env), then ``--iterations`` timed ones; steps/s = decisions
sampled / wall time of those iterations (sampling and the PPO update, as a user sees it). Each env
runner is one process with 1 declared CPU: on a machine with fewer cores than runners the ratio
measures contention, not scaling — the script prints the core count beside the figures.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runners", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()

    import ray

    from cm_gym.backends.ray.cluster import connect
    from cm_gym.backends.ray.rllib import algorithm_config
    from cm_gym.protocol import ProtocolConfig, build_snapshot, load_snapshot, prepare

    with tempfile.TemporaryDirectory(prefix="bench_rllib-") as tmp:
        cfg = ProtocolConfig(benchmark="SQL", n_build=16, n_train=64, n_eval=8, seeds=(0,), out_dir=tmp)
        prepared = prepare(cfg)
        snapshot = load_snapshot(build_snapshot(cfg, prepared), prepared)
        env_config = {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.env_config().items()},
            "store": str(Path(snapshot.path).resolve()),
            "tasks": list(prepared.split.train),
            "task_order": "random",
        }
        connect(None, num_cpus=max(args.runners) + 1)
        rates: dict[int, float] = {}
        for n in args.runners:
            algo = algorithm_config(
                "rllib-ppo",
                env_config,
                seed=0,
                env_runners=n,
                total_decisions=args.batch * (args.iterations + 1),
                checkpoint_every=args.batch,
            ).build_algo()
            try:
                first = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
                started = time.perf_counter()
                for _ in range(args.iterations):
                    last = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
                rates[n] = (last - first) / (time.perf_counter() - started)
            finally:
                algo.stop()
            print(f"{n} env runner(s): {rates[n]:.1f} env steps/s", flush=True)
        ray.shutdown()
    base = rates[args.runners[0]]
    print(f"\nRLlib PPO env steps/s ({os.cpu_count()} cores on this machine, shared with other jobs)")
    print("| env runners | steps/s | ratio to 1 |")
    print("|---|---|---|")
    for n, r in rates.items():
        print(f"| {n} | {r:.1f} | {r / base:.2f} |")


if __name__ == "__main__":
    main()
