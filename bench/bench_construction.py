"""Construction throughput on the generated SQL benchmark with the simulated LLM, where the time goes,
and what a 200-task build admits (is the paper's boundary correction among the records?).

Run:  python bench/bench_construction.py [--tasks 200] [--benchmark SQL] [--seed 0] [--show 3]

Builds on the first N tasks of the benchmark's build split (make_split seed 12345) into a fresh
store in a temporary folder, then prints tasks/s, alternatives checked/s, the time split (LLM,
evaluator, admission, store, retrieval, other = the agent loop and bookkeeping), the admitted
records by contrast key, and whether a strict→inclusive boundary correction ("cmp:GT->GTE" under an
"at least"-type condition) is among them.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import build_tasks

from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.retrieval import record_view
from cm_gym.memory.store import RecordStore

INCLUSIVE = ("at least", "no fewer than", "no less than", "or more", "or older", "minimum of")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benchmark", default="SQL")
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--agent", default="react")
    ap.add_argument("--retention", default="utility")
    ap.add_argument("--show", type=int, default=3, help="print this many boundary records in full")
    args = ap.parse_args()

    t0 = time.perf_counter()
    spec, domain, tasks, build = build_tasks(args.benchmark, args.tasks)
    print(
        f"{spec.name}: {len(tasks)} tasks loaded in {time.perf_counter() - t0:.1f}s; building on {len(build)}"
    )

    with (
        tempfile.TemporaryDirectory() as tmp,
        RecordStore(Path(tmp) / "bench.sqlite", domain=domain.name) as store,
    ):
        summary = build_memory(
            domain,
            build,
            store,
            SimulatedLLM(seed=args.seed),
            domain.make_evaluator(),
            ConstructionConfig(retention=args.retention, seed=args.seed),
            agent_kind=args.agent,
        )
        total = summary.timings["total"]
        print()
        print(summary.format())
        print()
        print(
            f"throughput: {summary.tasks / total:.1f} tasks/s, {summary.alternatives_checked / total:.1f} alternatives checked/s, "
            f"{(summary.solving_calls + summary.verification_calls) / total:.1f} evaluator calls/s"
        )
        accounted = sum(v for k, v in summary.timings.items() if k != "total")
        split_txt = ", ".join(
            f"{k} {100 * v / total:.0f}%"
            for k, v in sorted(summary.timings.items(), key=lambda kv: -kv[1])
            if k != "total"
        )
        print(
            f"time split: {split_txt}, other (agent loop, parsing, bookkeeping) {100 * (total - accounted) / total:.0f}%"
        )
        keys = Counter(r.contrast_key for r in store.records)
        print(
            f"admitted records: {len(store)}; by contrast key: "
            + ", ".join(f"{k} x{n}" for k, n in keys.most_common())
        )
        boundary = [
            r
            for r in store.records
            if r.contrast_key.startswith("cmp:GT->GTE") and any(p in r.condition.lower() for p in INCLUSIVE)
        ]
        print(
            f"boundary correction (cmp:GT->GTE under an inclusive-wording condition) admitted: "
            f"{'YES' if boundary else 'NO'} ({len(boundary)} record(s))"
        )
        for r in boundary[: args.show]:
            print()
            print(
                f"--- {r.record_id} from {r.source_task_id} (u {r.u:+.3f}, {r.uses} uses, {r.helpful} helpful)"
            )
            print(f"condition: {r.condition}")
            print(record_view(r).rendered)


if __name__ == "__main__":
    main()
