"""Parallel construction (`cm_gym.memory.parallel`) vs the serial build: wall time, the ratio, how
many calls the writer replayed from the workers' speculation, and byte identity of the stores.

    python bench/bench_parallel_construction.py [--benchmark SQL] [--tasks 60] [--workers 2]

Both builds run in this process one after the other on the same T_build prefix (split seed 12345),
with the simulated LLM (seed 0), the domain's own evaluator and SOURCE_DATE_EPOCH pinned; the
parallel wall time includes starting its worker processes. Each worker is one process: on a
machine with fewer free cores than workers + 1 the ratio measures contention, not scaling — the
script prints the core count beside the figures.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SOURCE_DATE_EPOCH", "1700000000")

from cm_gym.llm.simulated import SimulatedLLM  # noqa: E402
from cm_gym.memory.construction import ConstructionConfig, build_memory  # noqa: E402
from cm_gym.memory.parallel import ParallelStats, build_memory_parallel  # noqa: E402
from cm_gym.memory.store import RecordStore  # noqa: E402
from cm_gym.registry import get_benchmark, get_domain  # noqa: E402
from cm_gym.splits import make_split  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="SQL")
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    spec = get_benchmark(args.benchmark)
    domain = get_domain(spec.domain_name)
    tasks = list(spec.load_tasks())
    split = make_split(tasks, seed=12345, by_env=spec.split_by_env)
    by_id = {t.task_id: t for t in tasks}
    build = [by_id[i] for i in split.build[: args.tasks]]
    make_llm = functools.partial(SimulatedLLM, seed=0)
    cfg = ConstructionConfig()
    with tempfile.TemporaryDirectory(prefix="bench_parallel-") as tmp:
        paths = {name: Path(tmp) / f"{name}.sqlite" for name in ("serial", "parallel")}
        started = time.perf_counter()
        with RecordStore(paths["serial"], domain=domain.name, benchmark=spec.name) as store:
            summary = build_memory(domain, build, store, make_llm(), domain.make_evaluator(), cfg)
        serial_s = time.perf_counter() - started
        stats = ParallelStats()
        started = time.perf_counter()
        with RecordStore(paths["parallel"], domain=domain.name, benchmark=spec.name) as store:
            build_memory_parallel(
                domain, build, store, make_llm, None, cfg, workers=args.workers, stats=stats
            )
        parallel_s = time.perf_counter() - started
        identical = paths["serial"].read_bytes() == paths["parallel"].read_bytes()
    print(
        f"{spec.name}, {len(build)} build tasks, {summary.admitted} records admitted; "
        f"{os.cpu_count()} cores on this machine (shared with other jobs)"
    )
    print(f"serial:   {serial_s:.1f} s")
    print(
        f"parallel: {parallel_s:.1f} s with {args.workers} speculation workers "
        f"({stats.hits} calls replayed, {stats.misses} computed by the writer: "
        f"{100 * stats.hit_rate:.0f}% hits; writer waited {stats.wait_seconds:.1f} s)"
    )
    print(f"ratio serial / parallel: {serial_s / parallel_s:.2f}x; stores byte-identical: {identical}")


if __name__ == "__main__":
    main()
