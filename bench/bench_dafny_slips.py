"""Benchmark Dafny's slip families, verdict cache, parallel checks and first ``gym.make``.

Prints:
- ``--counts``: how often DafnyBench's ground truths need each slip family (the source of the
  family split in `cm_gym.domains.dafny.slips`), and how many add a frame clause;
- ``--slips``: the simulated LLM's active slips over all 445 tasks (seed 0) and, per family, the
  share of spoilt drafts whose repair is among the reference-blind edits;
- ``--cache``: a first check against its cached repeat, and `check_many` of 4 programs against the
  same 4 checked one by one (both measured in this run, on fresh caches);
- ``--first-make``: ``gym.make("cm_gym/Dafny-v0")`` in a fresh process on a fresh cache;
- ``--store PATH``: records of a frozen store, by slip family, the share whose condition excludes
  a look-alike (a task of the same family — loops, lemmas, … — on which it is false), and examples.

    python bench/bench_dafny_slips.py --counts --slips --cache --first-make
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import first_make

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.dafny.loader import load_dafny_tasks

FAMILIES = ("weak_bound", "drop_slice_invariant", "drop_decreases")


def _anns(task: Task, action: str) -> collections.Counter[str] | None:
    try:
        found = extract_annotations(str(task.meta["program"]), action)
    except AnnotationError:
        return None
    return collections.Counter("".join(a.text.split()).rstrip(";") for a in found)


def bench_counts(tasks: list[Task]) -> None:
    need: collections.Counter[str] = collections.Counter()
    refused = frames = 0
    for t in tasks:
        prog = str(t.meta["program"])
        if len(re.findall(r"\b(modifies|reads)\b", t.reference)) > len(
            re.findall(r"\b(modifies|reads)\b", prog)
        ):
            frames += 1
        try:
            anns = extract_annotations(prog, t.reference)
        except AnnotationError:
            refused += 1
            continue
        kinds = set()
        for a in anns:
            text = " ".join(a.text.split())
            kinds.add(a.keyword)
            if re.match(r"invariant\s+\S+\s*<=\s*\w+\s*<=", text):
                kinds.add("bound invariant lo <= i <= n")
            if a.keyword == "invariant" and re.search(r"\[\s*\.\.|\.\.\s*\]", text):
                kinds.add("slice invariant")
        need.update(kinds)
    print(f"DafnyBench ground truths: {len(tasks)} ({refused} refused by the annotation checker)")
    for kind, n in need.most_common():
        print(f"  programs needing {kind:<32} {n:4d}")
    print(f"  ground truths adding a frame clause (modifies/reads) {frames:4d}")


def bench_slips(tasks: list[Task]) -> None:
    from cm_gym.llm.simulated import SimulatedLLM

    domain = DafnyDomain()
    ops = {op.name: op for op in domain.error_model().operators}
    llm = SimulatedLLM(seed=0)
    active = collections.Counter(op.name for t in tasks for op in llm.active_slips(t))
    print("active slips of the seed-0 simulated LLM over", len(tasks), "tasks:", dict(active.most_common()))
    for name in FAMILIES:
        fired = repaired = 0
        for t in tasks:
            if ops[name].probability(t) == 0:
                continue
            out = ops[name].apply(t, t.reference, np.random.default_rng(0))
            if out is None:
                continue
            fired += 1
            want = _anns(t, t.reference)
            repaired += any(_anns(t, e.text) == want for e in domain.edit_operators(t, out))
        print(f"  {name:<22} applies to {fired:3d} ground truths; repair among the edits for {repaired:3d}")


def bench_cache(tasks: list[Task]) -> None:
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator

    task = next(t for t in tasks if "Clover_array_append" in t.meta["file"])
    edits = [e.text for e in DafnyDomain().edit_operators(task, task.reference)][:4]
    state = AgentState(task)
    with tempfile.TemporaryDirectory() as tmp:
        ev = DafnyEvaluator(cache=Path(tmp) / "a.sqlite", workers=1)
        start = time.perf_counter()
        ev.check(state, Action(task.reference))
        first = time.perf_counter() - start
        start = time.perf_counter()
        ev.check(state, Action(task.reference))
        again = time.perf_counter() - start
        print(
            f"verdict cache: first check {first:.2f}s, cached repeat {again * 1000:.2f} ms ({first / again:.0f}x)"
        )
        start = time.perf_counter()
        ev.check_many(state, [Action(e) for e in edits])
        seq = time.perf_counter() - start
        par_ev = DafnyEvaluator(cache=Path(tmp) / "b.sqlite", workers=2)
        start = time.perf_counter()
        par_ev.check_many(state, [Action(e) for e in edits])
        par = time.perf_counter() - start
        print(
            f"check_many of {len(edits)} programs: one by one {seq:.1f}s, 2 workers {par:.1f}s ({seq / par:.2f}x)"
        )


def bench_first_make() -> None:
    made = first_make("cm_gym/Dafny-v0")
    if made is not None:
        seconds, records, wall = made
        print(f"first gym.make('cm_gym/Dafny-v0') on a fresh cache: {seconds}s in-process "
              f"({wall:.1f}s with interpreter start; load average {os.getloadavg()[0]:.1f}); "
              f"default store: {records} records")  # fmt: skip


def bench_store(path: str, tasks: list[Task]) -> None:
    from cm_gym.domains.conditions import parse_condition
    from cm_gym.memory.snapshot import FrozenStore

    domain = DafnyDomain()
    preds = domain.condition_predicates()
    by_id = {t.task_id: t for t in tasks}
    records = list(FrozenStore.open(path).records)
    kinds = collections.Counter(domain.edit_kind(r.a_minus, r.a_plus) for r in records)
    excl = conditioned = 0
    for r in records:
        if not r.condition.strip():
            continue
        conditioned += 1
        cond = parse_condition(r.condition, preds)
        src = by_id.get(r.source_task_id)
        family = src.family if src else None
        excl += any(t.family == family and not cond.holds(t) for t in tasks)
    print(f"{len(records)} records ({conditioned} conditioned); kinds: {dict(kinds.most_common())}")
    print(f"share whose condition excludes a look-alike (same task family, condition false): "
          f"{excl}/{len(records)} = {excl / max(1, len(records)):.0%}")  # fmt: skip
    for r in records[:3]:
        print("---", r.record_id, "|", domain.contrast_key(r.a_minus, r.a_plus), "|", r.condition)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", action="store_true")
    ap.add_argument("--slips", action="store_true")
    ap.add_argument("--cache", action="store_true")
    ap.add_argument("--first-make", action="store_true")
    ap.add_argument("--store", metavar="PATH")
    args = ap.parse_args()
    tasks = load_dafny_tasks()
    if args.counts:
        bench_counts(tasks)
    if args.slips:
        bench_slips(tasks)
    if args.cache:
        bench_cache(tasks)
    if args.first_make:
        bench_first_make()
    if args.store:
        bench_store(args.store, tasks)


if __name__ == "__main__":
    main()
