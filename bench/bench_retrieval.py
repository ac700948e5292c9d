"""Retrieval latency (median, p99) at 200 / 10k / 100k / 1M synthetic records, and memory per record.

Run:  python bench/bench_retrieval.py [--sizes 200,10000,100000,1000000] [--calls 400] [--threads 1]

Each size builds a synthetic single-domain store, a four-domain store (the domain pre-filter is a
contiguous 25 % slice), and runs the condition ablation (use_conditions=False: every row of the
domain is scored — the worst case). Records carry 64 distinct
conditions built from the generic kinds, so eligibility is really evaluated; source tasks repeat so
the own-task exclusion masks rows. Latency is `Retriever.retrieve(task, query=q)` — the query
embedding is computed once per task and timed separately, because the env embeds the state for its
observation anyway and the embedder has its own LRU cache. "warm" calls hit the per-task condition
cache (the steady state of RL training, which replays the same tasks); "cold" calls are each
task's first retrieval. Embeddings are float32 (2 KiB/record); ``--dtype float16`` halves that but
is scored in float32 chunks, which NumPy converts slowly (measured: ~10x slower at 1M).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from typing import Any

import numpy as np
from _common import ColumnSource

from cm_gym.core.types import Task
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.record import Record
from cm_gym.memory.retrieval import Retriever, query_text

PHRASES = ["at least", "no fewer than", "strictly", "more than", "at most", "distinct", "highest", "lowest"]
DOMAINS = ("sql", "sat", "smt", "code")


def conditions() -> list[str]:
    out = [""]
    for i, a in enumerate(PHRASES):
        for b in PHRASES[i + 1 :]:
            out.append(f'mentions_any("{a}") AND mentions_none("{b}")')
    out += [f'feature_equals("bucket", {i})' for i in range(64 - len(out))]
    return out[:64]


class SyntheticSource(ColumnSource):
    """Random skewed embeddings over `n_domains` domains (contiguous blocks) and 64 conditions."""

    def __init__(self, n: int, n_domains: int, dtype: Any, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.n = n
        self.embeddings = np.empty((n, 512), dtype=dtype)
        for s in range(0, n, 65536):
            e = min(n, s + 65536)
            block = rng.random((e - s, 512), dtype=np.float32) ** 4  # skewed, non-negative like hashing
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            self.embeddings[s:e] = block
        self.embeddings.setflags(write=False)
        self.conds = conditions()
        self.dom_idx = np.sort(rng.integers(0, n_domains, n))
        cond_idx = rng.integers(0, len(self.conds), n)
        # rows already in the index's (domain, condition) order, so the index is a view, not a copy
        self.cond_idx = cond_idx[np.lexsort((cond_idx, self.dom_idx))]
        self.src_idx = rng.integers(0, max(1, n // 3), n)
        self.u = rng.uniform(-1, 1, n).astype(np.float32)
        self.embedder_id = Embedder().embedder_id
        self.dim = 512

    def row_domains(self) -> list[str]:
        return [DOMAINS[d] for d in self.dom_idx]

    def row_domain(self, i: int) -> str:
        return DOMAINS[self.dom_idx[i]]


def make_tasks(n: int, rng: np.random.Generator) -> list[Task]:
    out = []
    for i in range(n):
        a, b = rng.choice(PHRASES, 2, replace=False)
        out.append(
            Task(
                task_id=f"task-{i}",
                domain="sql",
                prompt=f"List the rows with a value {a} 10, not {b}, from table t{i % 17}.",
                env_id="db",
                reference="",
                features={"bucket": int(i % 64)},
            )
        )
    return out


def measure(
    source: SyntheticSource, tasks: list[Task], queries: np.ndarray, calls: int, use_conditions: bool = True
) -> dict[str, float]:
    ret = Retriever(source, None, k=3, use_conditions=use_conditions)
    t0 = time.perf_counter()
    _ = ret.index
    build_s = time.perf_counter() - t0
    cold, warm, sizes, elig = [], [], [], []
    for i in range(calls):
        j = i % len(tasks)
        t = time.perf_counter()
        got = ret.retrieve(tasks[j], query=queries[j])
        (cold if i < len(tasks) else warm).append(time.perf_counter() - t)
        sizes.append(len(got))
        if i < len(tasks):
            lo, hi = ret.index.domain_ranges.get("sql", (0, 0))
            frac = float(ret.index.holds_mask(tasks[j], lo, hi).mean()) if hi > lo else 0.0
            elig.append(frac if use_conditions else 1.0)
    idx = ret.index
    index_bytes = sum(a.nbytes for a in (idx.rows, idx.source_codes, idx.cond_codes, idx.u, idx.id_rank))
    return {
        "build_s": build_s,
        "cold_med_ms": 1e3 * float(np.median(cold)),
        "warm_med_ms": 1e3 * float(np.median(warm)) if warm else float("nan"),
        "warm_p99_ms": 1e3 * float(np.percentile(warm, 99)) if warm else float("nan"),
        "returned": float(np.mean(sizes)),
        "eligible": float(np.mean(elig)),
        "emb_bytes_per_record": source.embeddings.nbytes / source.n,
        "index_bytes_per_record": index_bytes / source.n,
    }


def record_object_bytes(n: int = 20000) -> float:
    """Python memory of real `Record` objects (what a FrozenStore holds besides the arrays)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    recs = [
        Record.create(
            domain="sql",
            source_task_id=f"sqlgen-{i:05d}",
            env_id=f"db{i % 9}",
            situation=f"A numeric threshold predicate may omit its boundary value ({i}).",
            a_minus=f"SELECT name FROM people WHERE age > {i}",
            a_plus=f"SELECT name FROM people WHERE age >= {i}",
            evidence={
                "score_minus": 0.0,
                "score_plus": 1.0,
                "feedback_minus": "row count differs",
                "feedback_plus": "",
            },
            condition='mentions_any("at least", "no fewer than") AND sql_has_comparison("numeric")',
            contrast_key="cmp:GT->GTE",
            delta=1.0,
        )
        for i in range(n)
    ]
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del recs
    return used / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="200,10000,100000,1000000")
    ap.add_argument("--calls", type=int, default=400, help="retrievals per configuration")
    ap.add_argument("--tasks", type=int, default=100, help="distinct query tasks (cold calls)")
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: library default)")
    ap.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    ap.add_argument("--calls-1m", type=int, default=100, help="retrievals per configuration at >= 1M records")
    args = ap.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    rng = np.random.default_rng(1)
    tasks = make_tasks(args.tasks, rng)
    emb = Embedder()
    t0 = time.perf_counter()
    queries = emb.embed([query_text(t, "") for t in tasks])
    print(
        f"query embedding (sklearn HashingVectorizer, batch): {1e3 * (time.perf_counter() - t0) / len(tasks):.3f} ms/text"
    )
    t0 = time.perf_counter()
    for t in tasks[:50]:
        emb.embed([query_text(t, "state " * 100)])
    print(
        f"query embedding, one ~650-char state at a time: {1e3 * (time.perf_counter() - t0) / 50:.3f} ms/text"
    )
    print(f"Record objects in memory: {record_object_bytes():.0f} bytes/record (Python objects, measured)")
    print()
    header = f"{'records':>9} {'layout':>12} {'dtype':>7} {'index s':>8} {'cold ms':>8} {'warm med':>9} {'warm p99':>9} {'ret':>4} {'elig%':>6} {'B/rec emb+idx':>14}"
    print(header)
    for n in (int(s) for s in args.sizes.split(",") if s):
        dtype = np.float16 if args.dtype == "float16" else np.float32
        calls = args.calls_1m if n >= 1_000_000 else args.calls
        for n_domains, use_conditions in ((1, True), (4, True), (1, False)):
            src = SyntheticSource(n, n_domains, dtype)
            m = measure(src, tasks, queries, calls, use_conditions)
            layout = {(1, True): "1 domain", (4, True): "4 dom (25%)", (1, False): "no cond."}[
                (n_domains, use_conditions)
            ]
            print(
                f"{n:>9} {layout:>12} {np.dtype(dtype).name:>7} {m['build_s']:>8.2f} {m['cold_med_ms']:>8.3f} "
                f"{m['warm_med_ms']:>9.3f} {m['warm_p99_ms']:>9.3f} {m['returned']:>4.1f} {100 * m['eligible']:>6.1f} "
                f"{m['emb_bytes_per_record']:>7.0f}+{m['index_bytes_per_record']:.0f}",
                flush=True,
            )
            del src
            gc.collect()


if __name__ == "__main__":
    main()
