"""How long `cm-gym compare` takes (issue 34): wall and CPU seconds, whole and per policy.

    python bench/bench_compare.py [--benchmark SQL] [--seeds 0 1 2 3 4] [--n-eval N] [--n-train N]
                                  [--total-decisions 2000] [--policies ...] [--out DIR]

Runs `cm_gym.protocol.compare.run_comparison` exactly as the command does (the benchmark's default
snapshot, the simulated LLM, the paper observation layout) and reports wall-clock beside CPU
seconds (this process and its children, from `resource.getrusage`): on a shared machine the two
differ, and CPU seconds are what another machine of the same speed would need. Per learned
selector it reports the training seconds per seed (its `fit` record), per phase the protocol's
own timings (train = the masked DQN; evaluate = every policy's episodes, the learned selectors'
training included). Writes ``bench_compare.json`` next to the comparison's ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from cm_gym.protocol import ProtocolConfig
from cm_gym.protocol.compare import COMPARE_POLICIES, run_comparison


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--benchmark", default="SQL")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--n-eval", type=int, default=None)
    p.add_argument("--n-train", type=int, default=None)
    p.add_argument("--total-decisions", type=int, default=2000)
    p.add_argument("--policies", nargs="+", default=list(COMPARE_POLICIES))
    p.add_argument("--out", type=Path, default=None, help="output folder (default: a temporary one)")
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_compare_"))
    cfg = ProtocolConfig(
        benchmark=args.benchmark,
        out_dir=out,
        seeds=tuple(args.seeds),
        n_eval=args.n_eval,
        n_train=args.n_train,
        total_decisions=args.total_decisions,
        policies=tuple(args.policies),
        obs_layouts=("paper",),
        tensorboard=False,
        progress=False,
    )
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    results = run_comparison(cfg)
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    training = {
        name: {
            "seconds_per_seed": statistics.mean(r["seconds"] for r in res["training"]),
            "cpu_seconds_per_seed": statistics.mean(r["cpu_seconds"] for r in res["training"]),
            "decisions_per_seed": statistics.mean(r["decisions"] for r in res["training"]),
        }
        for name, res in results["policies"].items()
        if res.get("training")
    }
    report = {
        "benchmark": args.benchmark,
        "seeds": len(args.seeds),
        "split": results["split"],
        "store_records": results["snapshot"]["records"],
        "policies": list(results["policies"]),
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "phases": results["timings"],
        "learned_training": training,
    }
    (out / "bench_compare.json").write_text(json.dumps(report, indent=2))
    print(
        f"{args.benchmark}: {len(results['policies'])} policies × {len(args.seeds)} seed(s) × "
        f"{results['split']['eval']} eval tasks ({results['split']['train']} train, "
        f"{results['snapshot']['records']} records)"
    )
    print(f"total: wall {wall:.1f} s, CPU {cpu:.1f} s")
    for phase, seconds in results["timings"].items():
        print(f"  {phase:<18} wall {seconds:.1f} s")
    for name, row in training.items():
        print(
            f"  fit {name:<13} {row['decisions_per_seed']:.0f} decisions/seed: wall "
            f"{row['seconds_per_seed']:.2f} s, CPU {row['cpu_seconds_per_seed']:.2f} s per seed"
        )
    print(f"results: {out / 'results.json'}; {out / 'bench_compare.json'}")


if __name__ == "__main__":
    main()
