"""Benchmark the math world model (Coq in the sandbox) and its portfolio references.

Prints, each measured in this run:

- the sandbox's overhead on a ``coqc`` check: the same check file run by plain ``coqc`` in a temp
  dir and by `Sandbox.run` (interleaved, several rounds), as a ratio (target ≤ 1.3×); and the
  whole evaluator check (vetting, plan, sandbox, reading the verdict) against the same plain run;
- the verdict cache: a repeated check's time against its first;
- the hostile corpus: outcomes by expectation, slowest entry;
- ``--verify``: every shipped proof re-checked from scratch (no cache) — solved / total, time;
- ``--portfolio``: the portfolio search over all statements — coverage and wall time
  (``--write`` also rewrites the shipped table);
- ``--first-make``: ``gym.make("cm_gym/MiniF2F-v0")`` in a fresh process on a fresh cache.

    python bench/bench_math.py                         # overhead, cache, hostile (a few minutes)
    python bench/bench_math.py --verify --first-make   # + shipped proofs, first gym.make
    python bench/bench_math.py --portfolio             # + the portfolio search (~10 min, 2 workers)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import first_make

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.math.checker import FILENAME, build_plan
from cm_gym.domains.math.evaluator import MathEvaluator
from cm_gym.domains.math.hostile import CORPUS, hostile_task
from cm_gym.domains.math.loader import load_minif2f_tasks
from cm_gym.domains.math.proofs import read_table
from cm_gym.domains.math.script import parse_script
from cm_gym.domains.math.statement import statement_of


def _spread(tasks: list[Task], n: int) -> list[Task]:
    if n >= len(tasks):
        return tasks
    step = len(tasks) / n
    return [tasks[int(i * step)] for i in range(n)]


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def plain_coqc(coqc: str, text: str) -> tuple[float, float]:
    """The check file in a temp dir under plain ``coqc`` (no sandbox): (wall s, CPU s)."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / FILENAME).write_text(text)
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run([coqc, "-q", "-no-glob", "-o", str(Path(d) / "task.vo"), FILENAME], cwd=d,
                       capture_output=True, check=False)  # fmt: skip
        return time.perf_counter() - start, _children_cpu() - cpu


def bench_overhead(tasks: list[Task], rounds: int) -> None:
    ev = MathEvaluator(cache=None)
    cases = []
    for t in tasks:
        draft = next((e.text for e in _edits(t)), t.reference)
        for script in (t.reference, draft):
            cases.append((t, script, build_plan(statement_of(t), parse_script(script), ev.install).text))
    argv = [ev.install.coqc, "-q", "-no-glob", "-o", "scratch/task.vo", FILENAME]
    plain: list[tuple[float, float]] = []
    boxed: list[tuple[float, float]] = []
    whole: list[tuple[float, float]] = []
    for r in range(rounds):
        for i, (task, script, text) in enumerate(cases):
            order = (0, 1, 2) if (i + r) % 2 == 0 else (2, 1, 0)
            for which in order:
                if which == 0:
                    plain.append(plain_coqc(ev.install.coqc, text))
                    continue
                cpu, start = _children_cpu(), time.perf_counter()
                if which == 1:
                    ev.sandbox.run(argv, {FILENAME: text}, limits=ev.limits)
                else:
                    MathEvaluator(cache=None).check(AgentState(task), Action(script))
                (boxed if which == 1 else whole).append((time.perf_counter() - start, _children_cpu() - cpu))
    print(f"coqc check overhead ({len(cases)} check files x {rounds} rounds, interleaved; isolation "
          f"{ev.sandbox.isolation}; load average {os.getloadavg()[0]:.1f}):")  # fmt: skip
    base_wall, base_cpu = sum(w for w, _ in plain), sum(c for _, c in plain)
    for label, rows in (("plain coqc", plain), ("sandboxed coqc", boxed), ("evaluator.check", whole)):
        wall, cpu = sum(w for w, _ in rows), sum(c for _, c in rows)
        print(f"  {label:16s} wall {wall:7.2f}s (median {statistics.median(w for w, _ in rows):.3f}s)  "
              f"child CPU {cpu:6.2f}s  ratio to plain: wall {wall / base_wall:.3f}x, CPU {cpu / max(1e-9, base_cpu):.3f}x")  # fmt: skip


def _edits(task: Task):  # type: ignore[no-untyped-def]
    from cm_gym.domains.math.domain import MathDomain

    return MathDomain().edit_operators(task, task.reference)


def bench_cache(task: Task) -> None:
    with tempfile.TemporaryDirectory() as d:
        ev = MathEvaluator(cache=Path(d) / "v.sqlite")
        start = time.perf_counter()
        ev.check(AgentState(task), Action(task.reference))
        first = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(100):
            ev.check(AgentState(task), Action(task.reference))
        again = (time.perf_counter() - start) / 100
    print(
        f"verdict cache: first check {first:.3f}s, cached repeat {again * 1000:.2f} ms ({first / again:.0f}x)"
    )


def bench_hostile() -> None:
    ev = MathEvaluator(cache=None)
    task = hostile_task()
    rows = []
    for h in CORPUS:
        start = time.perf_counter()
        o = ev.check(AgentState(task), Action(h.script))
        rows.append((h, o, time.perf_counter() - start))
    counts = Counter((h.expect, o.status, o.solved) for h, o, _ in rows)
    print(f"hostile corpus ({len(CORPUS)} scripts): " + ", ".join(
        f"{e}->{s}{' solved' if solved else ''}: {n}" for (e, s, solved), n in sorted(counts.items())))  # fmt: skip
    bad = [h.name for h, o, _ in rows if (h.expect != "harmless" and (o.solved or o.score > 0))]
    slow = max(rows, key=lambda r: r[2])
    print(f"  not contained: {bad or 'none'}; slowest: {slow[0].name} {slow[2]:.2f}s")


def bench_verify(tasks: list[Task]) -> None:
    ev = MathEvaluator(cache=None)
    start = time.perf_counter()
    failed = [t.meta["theorem"] for t in tasks if not ev.check(AgentState(t), Action(t.reference)).solved]
    wall = time.perf_counter() - start
    print(f"shipped proofs re-verified: {len(tasks) - len(failed)}/{len(tasks)} solved in {wall:.1f}s "
          f"({wall / max(1, len(tasks)):.2f}s each); failed: {failed or 'none'}")  # fmt: skip


def bench_portfolio(workers: int, per_try: int, write: bool) -> None:
    from cm_gym.domains.math.portfolio import main

    start = time.perf_counter()
    main(["--workers", str(workers), "--per-try", str(per_try)] + (["--write"] if write else []))
    print(f"portfolio search wall time (incl. loading): {time.perf_counter() - start:.0f}s")


def bench_first_make() -> None:
    made = first_make("cm_gym/MiniF2F-v0")
    if made is not None:
        seconds, records, wall = made
        print(f"first gym.make('cm_gym/MiniF2F-v0') on a fresh cache: {seconds}s in-process "
              f"({wall:.1f}s with interpreter start); default store: {records} records")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8, help="benchmark tasks sampled for the overhead")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--portfolio", action="store_true")
    ap.add_argument("--write", action="store_true", help="with --portfolio: rewrite the shipped table")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--per-try", type=int, default=5)
    ap.add_argument("--first-make", action="store_true")
    ap.add_argument("--skip-hostile", action="store_true")
    args = ap.parse_args()
    tasks = load_minif2f_tasks()
    table = read_table()
    print(f"MiniF2F-v0: {len(tasks)} statements with a verified portfolio proof out of "
          f"{len(table['proofs']) + len(table['unproved'])} (Coq {table.get('coq', '?')})")  # fmt: skip
    bench_overhead(_spread(tasks, args.tasks), args.rounds)
    bench_cache(tasks[0])
    if not args.skip_hostile:
        bench_hostile()
    if args.verify:
        bench_verify(tasks)
    if args.portfolio:
        bench_portfolio(args.workers, args.per_try, args.write)
    if args.first_make:
        bench_first_make()


if __name__ == "__main__":
    main()
