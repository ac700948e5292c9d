"""Benchmark of the SQL world model (issue 2) and of the simulated-LLM SQL error model (issue 3).

Prints:
1. evaluator cost vs plain sqlite3 on every Spider gold query of the shared subset (same run,
   interleaved, reference results cached; plain sqlite3 reuses one read-only connection per
   database and does execute + fetchall): CPU and wall per query and their ratios (target <= 1.3x),
   measured by `bench_world_models.py` (which also times the SAT and SMT world models);
2. correctness on real data: every gold judged correct against itself; perturbed golds (flip one
   comparison, drop DISTINCT, flip the ORDER BY direction) judged wrong wherever the result
   really changes (ground truth: the raw result lists / multisets differ);
3. the simulated-LLM draft failure rate per template family on the generated benchmark: each
   task's error operators are sampled with their feature-dependent probabilities and applied to
   the reference, and the draft is checked by the evaluator.

Usage: python bench/bench_sql_evaluator.py [--root DIR] [--rounds 7] [--seed 0] [--n-tasks 800]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql import SQLDomain, load_generated_tasks, load_spider_tasks
from cm_gym.domains.sql.edits import raw_edits
from cm_gym.domains.sql.evaluator import SQLEvaluator
from cm_gym.domains.sql.schema import ro_uri


def timing(tasks: list[Task], rounds: int) -> None:
    """Section 1: the SQL check against plain sqlite3 on the gold queries, in CPU and wall seconds
    (`bench_world_models.py` does the measuring, for every world model)."""
    from bench_world_models import measure, print_header, print_row, sql_groups

    print(
        f"== 1. evaluator vs plain sqlite3 on {len(tasks)} Spider gold queries ({rounds} interleaved rounds)"
    )
    print_header()
    for group in sql_groups(None, tasks, with_predictions=False):
        print_row(measure(group, rounds))


def _raw(conn: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]] | None:
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.Error:
        return None


def correctness(tasks: list[Task]) -> None:
    evaluator = SQLEvaluator()
    evaluator.memo.size = 0  # time every check (the verdict memo would answer repeats)
    self_ok = sum(evaluator.check(AgentState(t), Action(t.reference)).solved for t in tasks)
    print(f"\n== 2. correctness on real data ({len(tasks)} Spider tasks)")
    print(f"gold judged correct against itself: {self_ok}/{len(tasks)}")
    conns: dict[str, sqlite3.Connection] = {}
    rows = []
    for t in tasks:
        path = t.meta["db_path"]
        conn = conns.setdefault(path, sqlite3.connect(ro_uri(path), uri=True))
        gold = _raw(conn, t.reference)
        ordered = bool(t.features.get("has_order"))
        picked: dict[str, str] = {}
        for edit in raw_edits(t.reference):
            kind = edit.unit.split(":")[0]
            if (
                kind == "comparison"
                and "comparison" not in picked
                and edit.change.frm in ("GT", "GTE", "LT", "LTE")
            ):
                picked["comparison"] = edit.text
            elif kind == "distinct" and edit.change.to == "remove" and "distinct" not in picked:
                picked["distinct"] = edit.text
            elif kind == "order" and "order" not in picked:
                picked["order"] = edit.text
        for kind, sql in picked.items():
            res = _raw(conn, sql)
            if res is None:
                changed = True
            elif ordered:
                changed = res != gold
            else:
                changed = Counter(res) != Counter(gold)
            wrong = not evaluator.check(AgentState(t), Action(sql)).solved
            rows.append((kind, changed, wrong, res is None))
    print(
        f"{'perturbation':14s} {'perturbed':>9s} {'changed':>8s} {'judged wrong':>12s} {'agree':>6s} {'exec err':>8s}"
    )
    for kind in ("comparison", "distinct", "order", "all"):
        sel = [r for r in rows if kind == "all" or r[0] == kind]
        agree = sum(r[1] == r[2] for r in sel)
        print(
            f"{kind:14s} {len(sel):9d} {sum(r[1] for r in sel):8d} {sum(r[2] for r in sel):12d} "
            f"{agree / max(1, len(sel)):6.1%} {sum(r[3] for r in sel):8d}"
        )
    missed = sum(1 for r in rows if r[1] and not r[2])
    false_alarm = sum(1 for r in rows if r[2] and not r[1])
    print(f"changed but judged correct: {missed}; unchanged but judged wrong: {false_alarm}")
    for conn in conns.values():
        conn.close()


def simulate_draft(task: Task, domain: SQLDomain, rng: np.random.Generator) -> tuple[str, list[str]]:
    """Draft like the simulated LLM: sample each error operator, apply the slips to the reference."""
    action, slips = task.reference, []
    for op in domain.error_model().operators:
        p = op.probability(task)
        if p > 0 and rng.random() < p:
            out = op.apply(task, action, rng)
            if out is not None:
                action = out
                slips.append(op.name)
    return action, slips


def draft_failures(seed: int, n_tasks: int) -> None:
    t0 = time.perf_counter()
    tasks = load_generated_tasks(seed=seed, n_tasks=n_tasks)
    load_s = time.perf_counter() - t0
    domain = SQLDomain()
    evaluator = domain.make_evaluator()
    rng = np.random.default_rng(seed)
    per: dict[str, list[int]] = {}
    slips_total: Counter[str] = Counter()
    check_times, drafts = [], []
    for t in tasks:
        draft, slips = simulate_draft(t, domain, rng)
        drafts.append((AgentState(t), Action(draft)))
        slips_total.update(slips)
        t1 = time.perf_counter()
        outcome = evaluator.check(AgentState(t), Action(draft))
        check_times.append(time.perf_counter() - t1)
        stat = per.setdefault(t.family, [0, 0, 0])
        stat[0] += 1
        stat[1] += bool(slips)
        stat[2] += not outcome.solved
    print(
        f"\n== 3. simulated-LLM draft failure rate on the generated benchmark (seed {seed}, {len(tasks)} tasks)"
    )
    warm = []
    for state, action in drafts:  # second pass: reference results already cached
        t1 = time.perf_counter()
        evaluator.check(state, action)
        warm.append(time.perf_counter() - t1)
    print(
        f"load_tasks: {load_s * 1e3:.0f} ms; evaluator check median {statistics.median(check_times) * 1e6:.0f} us "
        f"first (incl. the reference query), {statistics.median(warm) * 1e6:.0f} us warm "
        f"(max {max(warm) * 1e6:.0f} us)"
    )
    print(f"{'family':16s} {'tasks':>5s} {'slipped':>8s} {'failed':>7s} {'fail rate':>9s}")
    for fam in sorted(per):
        n, s, f = per[fam]
        print(f"{fam:16s} {n:5d} {s:8d} {f:7d} {f / n:9.1%}")
    n = sum(v[0] for v in per.values())
    f = sum(v[2] for v in per.values())
    print(f"{'all':16s} {n:5d} {sum(v[1] for v in per.values()):8d} {f:7d} {f / n:9.1%}")
    print("slips applied:", ", ".join(f"{k}={v}" for k, v in slips_total.most_common()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", type=Path, default=None, help="Spider-layout folder (default data_root()/spider)"
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-tasks", type=int, default=800)
    args = parser.parse_args(argv)
    tasks = load_spider_tasks(root=args.root)
    timing(tasks, args.rounds)
    correctness(tasks)
    draft_failures(args.seed, args.n_tasks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
