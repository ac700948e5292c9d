"""Parallel construction (`cm_gym.memory.parallel`) vs the serial build: wall time, the ratio, how
many calls the writer replayed from the workers' speculation, and byte identity of the stores.

    python bench/bench_parallel_construction.py [--benchmark SQL] [--tasks 40] [--workers 2]
        [--latency-ms 0 500]

Both builds run in this process one after the other on the same T_build prefix (split seed 12345),
with the simulated LLM (seed 0), the domain's own evaluator and SOURCE_DATE_EPOCH pinned; the
parallel wall time includes starting its worker processes. ``--latency-ms`` adds a sleep to every
LLM call: the simulator answers in microseconds of CPU, a real endpoint in 0.1–10 s of waiting,
and waiting is what speculation overlaps (0 = the simulator as it is). Each worker is one
process: on a machine with fewer free cores than workers + 1 the CPU-bound ratio measures
contention, not scaling — the script prints the core count beside the figures.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("SOURCE_DATE_EPOCH", "1700000000")

from _common import build_tasks  # noqa: E402

from cm_gym.llm.simulated import SimulatedLLM  # noqa: E402
from cm_gym.memory.construction import ConstructionConfig, build_memory  # noqa: E402
from cm_gym.memory.parallel import ParallelStats, build_memory_parallel  # noqa: E402
from cm_gym.memory.store import RecordStore  # noqa: E402


class LatencyLLM:
    """`inner` with a fixed wait before each reply: a model of a real endpoint's latency."""

    def __init__(self, inner: SimulatedLLM, latency_s: float) -> None:
        self.inner, self.latency_s = inner, latency_s

    def complete(self, template: str, fields: Any) -> Any:
        time.sleep(self.latency_s)
        return self.inner.complete(template, fields)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def simulated_llm(seed: int, latency_s: float) -> Any:
    """The LLM recipe (picklable: workers build the same one)."""
    llm = SimulatedLLM(seed=seed)
    return LatencyLLM(llm, latency_s) if latency_s > 0 else llm


def one(domain: Any, spec: Any, build: list[Any], workers: int, latency_ms: float) -> None:
    """Serial then parallel build; print the figures."""
    make_llm = functools.partial(simulated_llm, seed=0, latency_s=latency_ms / 1000)
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
            build_memory_parallel(domain, build, store, make_llm, None, cfg, workers=workers, stats=stats)
        parallel_s = time.perf_counter() - started
        identical = paths["serial"].read_bytes() == paths["parallel"].read_bytes()
    print(
        f"| {latency_ms:g} | {summary.admitted} | {serial_s:.1f} | {parallel_s:.1f} | "
        f"{serial_s / parallel_s:.2f}x | {100 * stats.hit_rate:.0f}% ({stats.misses} computed) | "
        f"{stats.wait_seconds:.1f} | {stats.late} | {identical} |",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="SQL")
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 500.0])
    args = ap.parse_args()

    spec, domain, _, build = build_tasks(args.benchmark, args.tasks)
    print(
        f"{spec.name}, {len(build)} build tasks, {args.workers} speculation workers; "
        f"{os.cpu_count()} cores on this machine (shared with other jobs)\n"
    )
    print(
        "| LLM latency ms | records | serial s | parallel s | serial/parallel | calls replayed | writer waited s | not waited for | byte-identical |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for latency in args.latency_ms:
        one(domain, spec, build, args.workers, latency)


if __name__ == "__main__":
    main()
