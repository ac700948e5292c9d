"""Experiment-runner figures: a cold run, a cached rerun and an added seed, with their ratios.

    python bench/bench_experiments.py [--study table1] [--quick] [--workers 1]

1. Cold: `cm-gym experiment STUDY` into a fresh results folder; wall time and units computed.
2. Rerun: the same command again — every unit is a cache hit; wall time (report building only) and
   the ratio cold / rerun.
3. Added seed: the same command with one more selector seed — only the new seed's units are
   computed (printed: units computed vs the cold run's).
4. Per-kind unit times of the cold run (from each unit's ``result.json``), the basis for
   extrapolating full sizes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from cm_gym.studies.experiments import ExperimentConfig, run_experiments


def _run(study: str, cfg: ExperimentConfig) -> tuple[float, int, int]:
    """Wall time, units computed by this run, units in the folder."""
    before = set((cfg.results_dir / "units").glob("*/*"))
    started = time.perf_counter()
    run_experiments([study], cfg)
    elapsed = time.perf_counter() - started
    after = set((cfg.results_dir / "units").glob("*/*"))
    return elapsed, len(after - before), len(after)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="table1")
    ap.add_argument("--quick", action="store_true", help="smoke sizes (default: full sizes, SQL only)")
    ap.add_argument("--benchmarks", nargs="+", default=["SQL"])
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cm_gym_bench_exp_") as tmp:
        base = ExperimentConfig.make(
            quick=args.quick,
            benchmarks=tuple(args.benchmarks),
            results_dir=Path(tmp),
            workers=args.workers,
            progress=False,
        )
        cold, computed, total = _run(args.study, base)
        rerun, recomputed, _ = _run(args.study, base)
        more = replace(base, seeds=(*base.seeds, max(base.seeds) + 1))
        added, added_units, _ = _run(args.study, more)
        print(
            f"study {args.study} ({'quick' if args.quick else 'full'} sizes, {', '.join(args.benchmarks)}, {args.workers} worker(s))"
        )
        print(f"cold run:       {cold:8.1f} s, {computed} units computed ({total} in the folder)")
        print(
            f"rerun (cached): {rerun:8.1f} s, {recomputed} units computed; cold / rerun = {cold / max(rerun, 1e-9):.1f}x"
        )
        print(f"one more seed:  {added:8.1f} s, {added_units} units computed (cold: {computed})")
        per_kind: dict[str, list[float]] = defaultdict(list)
        for result in Path(tmp, "units").glob("*/*/result.json"):
            info = json.loads(result.read_text()).get("_unit", {})
            per_kind[result.parent.parent.name].append(float(info.get("seconds", 0.0)))
        for kind, secs in sorted(per_kind.items()):
            print(
                f"  {kind:10s} {len(secs):4d} units, mean {sum(secs) / len(secs):6.1f} s, total {sum(secs):7.1f} s"
            )


if __name__ == "__main__":
    main()
