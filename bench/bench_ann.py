"""Retrieval at scale: the ANN path (faiss, ``cm-gym[ann]``) against today's exact scan, same run.

Run:  python bench/bench_ann.py [--sizes 100000,1000000,5000000] [--tasks 150] [--exact-calls 40]
      [--threads N]

Store (per size n): `cm_gym.memory.synthetic.SituationCorpus` situations — templates of the
domains' distilled records with Zipf-skewed identifiers, tables, numbers and wording, embedded
exactly as `Embedder` does (composed per token; the script prints the check) — so neighbours are
clustered and near-tied as in a real store, not i.i.d. noise. Embeddings are float32 up to 1M
records and float16 above (5M x 512 float32 would be 10 GB). u = 0 for 70 % of the records, an
Eq.-6 value after 1–5 labelled uses for the rest; ~3 records per source task.

Conditions ("mix"): ``feature_equals("facet", f) [AND mentions_none("zzV")]`` (500 distinct texts).
The ten facets' record shares give each task an eligible fraction of 0.5, 1, 2.5, 5, 7.5, 10, 12.5,
15, 20 or 26 % — the spread measured on the built-in default stores (SQL 2.4–27 %, median 10 %;
SAT / SMT 0–31 %) plus a selective tail. "no filter" is the condition ablation
(``use_conditions=False``: every other-task record is eligible).

Each task retrieves twice (two drafts: two decisions of an episode); the first call is cold (its
conditions are evaluated and its eligibility bitmap is built). Latency is `Retriever.retrieve(task,
query=q)` with k = 4 (the query embedding is computed once, as the env does); "cpu med" is the
calling thread's CPU time, the call's cost without waiting for a busy machine's cores. Recall@4 is against
brute force over the same eligible set, computed in one batched pass: a returned record counts
when its rank score reaches the 4th best (an equal score is an equally correct answer); the strict
id overlap is printed too. The baseline is today's exact path on the same store in the same run
(``exact_max_rows`` = infinity), over `--exact-calls` calls. Memory: the index's serialized bytes
per record and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import tempfile
import time
from typing import Any

import numpy as np
from _common import ColumnSource

from cm_gym.core.types import Task
from cm_gym.memory import ann as ann_mod
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.retrieval import Retriever
from cm_gym.memory.synthetic import SituationCorpus, query_texts

K = 4
LAMBDA = 0.2
SHARES = np.array([0.5, 1, 2.5, 5, 7.5, 10, 12.5, 15, 20, 26]) / 100
VARIANTS = 50


class SyntheticSource(ColumnSource):
    """`SituationCorpus` situations with faceted conditions and Eq.-6 u values (module doc)."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.corpus = SituationCorpus(n, seed=seed)
        dtype = np.float32 if n <= 1_000_000 else np.float16
        self.embeddings = self.corpus.fill(np.empty((n, self.corpus.dim), dtype=dtype))
        self.embeddings.setflags(write=False)
        rng = np.random.default_rng([seed, 3])
        bounds = np.round(np.cumsum(np.concatenate([[0], SHARES])) / SHARES.sum() * n).astype(int)
        self.facet = np.repeat(np.arange(len(SHARES)), np.diff(bounds))
        self.cond_idx = np.empty(n, dtype=np.int32)
        for f in range(len(SHARES)):  # blocks: facet, then variant (sorted by first appearance)
            lo, hi = bounds[f], bounds[f + 1]
            self.cond_idx[lo:hi] = f * VARIANTS + np.sort(rng.integers(0, VARIANTS, hi - lo))
        self.conds = [
            f'feature_equals("facet", "{f}")' + (f' AND mentions_none("zz{v}")' if v else "")
            for f in range(len(SHARES))
            for v in range(VARIANTS)
        ]
        self.src_idx = rng.integers(0, max(1, n // 3), n)
        self.u = np.zeros(n, dtype=np.float32)
        used = np.flatnonzero(rng.random(n) < 0.3)
        for _ in range(5):  # Eq. 6 with rho = 0.3 over 1-5 labels in {+1: .5, 0: .3, -1: .2}
            step = used[rng.random(used.size) < 0.7]
            y = rng.choice([1.0, 0.0, -1.0], size=step.size, p=[0.5, 0.3, 0.2])
            self.u[step] = 0.7 * self.u[step] + 0.3 * y
        self.embedder_id = self.corpus.embedder_id
        self.dim = self.corpus.dim
        self.ann_index: ann_mod.AnnIndex | None = None

    def situation(self, i: int) -> str:
        return self.corpus.text(i)


def make_calls(src: SyntheticSource, n_tasks: int) -> tuple[list[Task], np.ndarray, np.ndarray]:
    """Tasks (half of them with records of their own in the store), and two query vectors per
    task (question + draft, then with feedback): call c belongs to task c // 2."""
    texts = query_texts(n_tasks, seed=11)
    rng = np.random.default_rng(5)
    own = rng.choice(src.src_idx, size=n_tasks // 2, replace=False)
    ids = [f"task-{j}" for j in own] + [f"new-{j}" for j in range(n_tasks - n_tasks // 2)]
    tasks = [
        Task(
            task_id=ids[i], domain="sql", prompt=t, env_id="db", reference="", features={"facet": str(i % 10)}
        )
        for i, t in enumerate(texts)
    ]
    second = [
        f"{t}\nFeedback: the result has {3 + i % 7} rows, the check expected {i % 5}."
        for i, t in enumerate(texts)
    ]
    queries = Embedder().embed([x for pair in zip(texts, second, strict=True) for x in pair])
    facets = np.array([i % 10 for i in range(n_tasks)])
    return tasks, queries, facets


def brute_force(
    src: SyntheticSource, tasks: list[Task], queries: np.ndarray, facets: np.ndarray, use_conditions: bool
) -> tuple[np.ndarray, list[set[int]]]:
    """Per call: the 4th best rank score among eligible rows and the ids of the exact top 4."""
    calls = len(queries)
    task_of = np.arange(calls) // 2
    own = np.array([int(t.task_id.split("-")[1]) if t.task_id.startswith("task-") else -1 for t in tasks])
    best_s = np.full((calls, 2 * K), -np.inf, dtype=np.float32)
    best_i = np.full((calls, 2 * K), -1, dtype=np.int64)
    for lo in range(0, src.n, 32768):
        hi = min(src.n, lo + 32768)
        s = np.asarray(src.embeddings[lo:hi], dtype=np.float32) @ queries.T + LAMBDA * src.u[lo:hi, None]
        bad = src.src_idx[lo:hi, None] == own[task_of][None, :]
        if use_conditions:
            bad |= src.facet[lo:hi, None] != facets[task_of][None, :]
        s[bad] = -np.inf
        top = np.argpartition(-s, 2 * K, axis=0)[: 2 * K] if hi - lo > 2 * K else np.arange(hi - lo)[:, None]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, top, 0).T], axis=1)
        cand_i = np.concatenate([best_i, (top + lo).T], axis=1)
        keep = np.argsort(-cand_s, axis=1, kind="stable")[:, : 2 * K]
        best_s, best_i = np.take_along_axis(cand_s, keep, 1), np.take_along_axis(cand_i, keep, 1)
    return best_s[:, K - 1], [set(map(int, row[:K])) for row in best_i]


def run(
    ret: Retriever, tasks: list[Task], queries: np.ndarray, calls: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[Any]]]:
    """Wall latencies, CPU times of this thread, cold latencies (first call of a task) and the
    results of the first `calls` calls."""
    lat, cpu, cold, got = [], [], [], []
    for c in range(calls):
        t0, c0 = time.perf_counter(), time.thread_time()
        res = ret.retrieve(tasks[c // 2], query=queries[c])
        dt = time.perf_counter() - t0
        cpu.append(time.thread_time() - c0)
        lat.append(dt)
        if c % 2 == 0:
            cold.append(dt)
        got.append(res)
    return np.asarray(lat) * 1e3, np.asarray(cpu) * 1e3, np.asarray(cold) * 1e3, got


def recall(got: list[list[Any]], kth: np.ndarray, exact_ids: list[set[int]]) -> tuple[float, float]:
    tie = strict = 0
    for c, res in enumerate(got):
        tie += sum(r.rank_score >= kth[c] - 1e-5 for r in res)
        strict += len({int(r.record.record_id, 16) for r in res} & exact_ids[c])
    return tie / (K * len(got)), strict / (K * len(got))


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def bench_size(n: int, n_tasks: int, exact_calls: int) -> None:
    t0 = time.perf_counter()
    src = SyntheticSource(n)
    print(
        f"\n== {n:,} records ({src.embeddings.dtype}, {src.embeddings.nbytes / n:.0f} B/record of "
        f"embeddings; store generated in {time.perf_counter() - t0:.0f} s; "
        f"composition check max |Δ| = {src.corpus.composition_error(50):.1e})",
        flush=True,
    )
    rss0 = peak_rss_gib()
    t0 = time.perf_counter()
    src.ann_index = ann_mod.build_for_source(src)
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(dir=os.environ.get("CM_GYM_CACHE")) as tmp:
        path = os.path.join(tmp, "index.ann")
        t0 = time.perf_counter()
        src.ann_index.save(path)  # type: ignore[arg-type]
        save_s, index_bytes = time.perf_counter() - t0, os.path.getsize(path)
    print(
        f"ANN build {build_s:.0f} s ({n / build_s:,.0f} records/s; nlist {src.ann_index.params['nlist']}), "
        f"save {save_s:.1f} s, index {index_bytes / n:.1f} B/record ({index_bytes / 2**20:.0f} MiB); "
        f"peak RSS {rss0:.1f} -> {peak_rss_gib():.1f} GiB",
        flush=True,
    )
    tasks, queries, facets = make_calls(src, n_tasks)
    print(f"{'setting':>10} {'path':>6} {'calls':>6} {'median ms':>10} {'p99 ms':>8} {'cold med':>9} "
          f"{'cpu med':>8} {'recall@4':>9} {'strict':>7} {'eligible %':>11}")  # fmt: skip
    for use_conditions, name in ((True, "mix"), (False, "no filter")):
        kth, exact_ids = brute_force(src, tasks, queries, facets, use_conditions)
        elig = (SHARES[facets] if use_conditions else np.ones(n_tasks)) * 100
        for path, exact_max in (("ann", ann_mod.EXACT_MAX_ROWS), ("exact", 10**12)):
            ret = Retriever(
                src, None, k=K, lambda_reuse=LAMBDA, use_conditions=use_conditions, exact_max_rows=exact_max
            )
            t0 = time.perf_counter()
            _ = ret.index
            setup_s = time.perf_counter() - t0
            calls = len(queries) if path == "ann" else min(len(queries), 2 * (exact_calls // 2))
            lat, cpu, cold, got = run(ret, tasks, queries, calls)
            r_tie, r_strict = recall(got, kth[:calls], exact_ids[:calls])
            print(
                f"{name:>10} {path:>6} {calls:>6} {np.median(lat):>10.2f} {np.percentile(lat, 99):>8.2f} "
                f"{np.median(cold):>9.2f} {np.median(cpu):>8.2f} {r_tie:>9.3f} {r_strict:>7.3f} "
                f"{elig[: calls // 2].min():>4.1f}-{elig[: calls // 2].max():<5.1f}  (index setup {setup_s:.1f} s)",
                flush=True,
            )
            del ret
            gc.collect()
    print(f"peak RSS {peak_rss_gib():.1f} GiB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000,5000000")
    ap.add_argument("--tasks", type=int, default=150, help="query tasks (two calls each)")
    ap.add_argument("--exact-calls", type=int, default=40, help="calls of the exact baseline per setting")
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: library default)")
    args = ap.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    ann_mod.require()
    import faiss

    print(
        f"faiss {faiss.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"ANN from {ann_mod.ANN_MIN_RECORDS:,} records, exact at most {ann_mod.EXACT_MAX_ROWS:,} eligible rows, "
        f"{ann_mod.CANDIDATES} candidates re-ranked"
    )
    for n in (int(s) for s in args.sizes.split(",") if s):
        bench_size(n, args.tasks, args.exact_calls)
        gc.collect()


if __name__ == "__main__":
    main()
