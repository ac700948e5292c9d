"""Benchmark the code-repair and Dafny world models and their sandbox.

Prints: the isolation applied; checks/s of both world models and the isolation layers' overhead
as a ratio to the same checks with limits only (code) / the same `dafny` command in a plain
subprocess (measured in the same run); real pytest's time on the same QuixBugs tests; the hostile-patch corpus outcomes;
QuixBugs counts (fixed → 1.0, buggy < 1.0); DafnyBench counts (ground truth verifies; what the
hints-removed file gives).

    python bench/bench_code_dafny.py                      # samples (a few minutes)
    python bench/bench_code_dafny.py --dafny-all --jobs 2 # every DafnyBench pair (long)
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.code.evaluator import CodeEvaluator
from cm_gym.domains.code.generated import load_generated_tasks
from cm_gym.domains.code.hostile_check import run_corpus
from cm_gym.evaluators.sandbox import Limits, Sandbox


def _spread(tasks: list[Task], n: int) -> list[Task]:
    if n >= len(tasks):
        return tasks
    step = len(tasks) / n
    return [tasks[int(i * step)] for i in range(n)]


def bench_code(n: int) -> dict[str, Any]:
    ev = CodeEvaluator()
    tasks = _spread(load_generated_tasks(), n)
    start = time.perf_counter()
    solved = 0
    for t in tasks:
        solved += ev.check(AgentState(t), Action(t.reference)).solved
    sandboxed = time.perf_counter() - start
    bare = CodeEvaluator(isolation="none")  # the same judge and tests, limits only (no namespaces/uid/tree)
    start = time.perf_counter()
    for t in tasks:
        bare.check(AgentState(t), Action(t.reference))
    plain = time.perf_counter() - start
    out = {"tasks": len(tasks), "reference_solved": solved, "checks_per_s": len(tasks) / sandboxed,
           "plain_checks_per_s": len(tasks) / plain, "overhead_ratio": sandboxed / plain}  # fmt: skip
    print(f"[code] generated: {len(tasks)} checks, {out['checks_per_s']:.2f} checks/s sandboxed vs "
          f"{out['plain_checks_per_s']:.2f}/s with limits only -> isolation overhead x{out['overhead_ratio']:.2f}; "
          f"reference solved {solved}/{len(tasks)}")  # fmt: skip
    return out


def bench_quixbugs(pytest_n: int) -> dict[str, Any]:
    from cm_gym.domains.code.loader import load_quixbugs_tasks, quixbugs_root

    ev = CodeEvaluator()
    tasks = load_quixbugs_tasks()
    fixed_ok, buggy_fail, rows = 0, 0, []
    start = time.perf_counter()
    for t in tasks:
        a = time.perf_counter()
        fixed = ev.check(AgentState(t), Action(t.reference))
        b = time.perf_counter()
        buggy = ev.check(AgentState(t), Action(t.meta["buggy"]))
        fixed_ok += fixed.score == 1.0
        buggy_fail += buggy.score < 1.0
        rows.append((t.task_id, fixed.score, b - a, buggy.score, buggy.status))
    elapsed = time.perf_counter() - start
    for tid, fs, ft, bs, st in rows:
        print(f"  {tid:38s} fixed={fs:.2f} ({ft:.2f}s)  buggy={bs:.2f} [{st}]")
    print(f"[quixbugs] fixed programs scoring 1.0: {fixed_ok}/{len(tasks)}; buggy programs < 1.0: "
          f"{buggy_fail}/{len(tasks)}; {2 * len(tasks) / elapsed:.2f} checks/s (buggy ones include timeouts)")  # fmt: skip
    # the same tests under real pytest (fixed versions), in a temp copy, vs our sandboxed check
    root = quixbugs_root()
    sample = _spread(tasks, pytest_n)
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "qb"
        shutil.copytree(root, copy)
        pt = 0.0
        ours = 0.0
        for t in sample:
            name = t.task_id.split("-", 1)[1]
            a = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--correct",
                            f"python_testcases/test_{name}.py"], cwd=copy, capture_output=True)  # fmt: skip
            pt += time.perf_counter() - a
            a = time.perf_counter()
            ev.check(AgentState(t), Action(t.reference))
            ours += time.perf_counter() - a
    print(f"[quixbugs] real pytest per program (fixed, {len(sample)} programs): {pt / len(sample):.2f}s; "
          f"our sandboxed runner: {ours / len(sample):.2f}s")  # fmt: skip
    return {"fixed_1.0": fixed_ok, "buggy_below_1": buggy_fail, "programs": len(tasks),
            "checks_per_s": 2 * len(tasks) / elapsed, "pytest_s_per_program": pt / len(sample),
            "ours_s_per_program": ours / len(sample)}  # fmt: skip


def bench_hostile() -> dict[str, Any]:
    ev = CodeEvaluator(limits=Limits(wall_s=4, cpu_s=4, memory_mb=256, max_procs=16, max_file_mb=4))
    print(f"[hostile] isolation: {ev.sandbox.isolation}")
    results = run_corpus(ev)
    for r in results:
        o = r.outcome
        if r.skipped:
            print(f"  {r.name:24s} SKIPPED ({r.skipped})")
            continue
        assert o is not None
        verdict = "contained" if r.contained else "ESCAPED: " + "; ".join(r.violations)
        print(f"  {r.name:24s} {verdict:10s} status={o.status:7s} score={o.score:.2f} {r.seconds:5.2f}s  "
              f"{' '.join((o.reason or o.feedback).split())[:90]}")  # fmt: skip
    ran = [r for r in results if not r.skipped]
    contained = sum(r.contained for r in ran)
    print(f"[hostile] {contained}/{len(ran)} contained ({len(results) - len(ran)} skipped)")
    return {"contained": contained, "ran": len(ran), "skipped": len(results) - len(ran)}


def _dafny_one(ev: Any, t: Task) -> tuple[Task, Any, Any, float]:
    a = time.perf_counter()
    gt = ev.check(AgentState(t), Action(t.reference))
    hr = ev.check(AgentState(t), Action(t.meta["program"]))
    return t, gt, hr, time.perf_counter() - a


def bench_dafny(n: int | None, jobs: int) -> dict[str, Any]:
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator
    from cm_gym.domains.dafny.loader import load_dafny_tasks

    ev = DafnyEvaluator()
    tasks = load_dafny_tasks()
    sample = tasks if n is None else _spread(tasks, n)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda t: _dafny_one(ev, t), sample))
    elapsed = time.perf_counter() - start
    gt_ok = sum(gt.solved for _, gt, _, _ in results)
    gt_kinds = collections.Counter(
        "verifies" if gt.solved else "times out" if gt.status == "timeout" or gt.details.get("timed_out") else
        "fails (error)" for _, gt, _, _ in results
    )  # fmt: skip
    hr = collections.Counter()
    for t, _, o, _ in results:
        kind = "verifies" if o.solved else {"ok": "fails to verify", "error": "parse/resolution error",
                                             "timeout": "timeout"}.get(o.status, o.status)  # fmt: skip
        hr[f"{kind} ({'identical to ground truth' if t.meta['hints_identical'] else 'hints removed'})"] += 1
    bad = [(t.meta["file"], gt.feedback) for t, gt, _, _ in results if not gt.solved]
    for f, fb in bad[:20]:
        print(f"  ground truth not verified: {f}: {fb[:120]}")
    print(f"[dafny] {len(sample)} tasks: ground truth verifies {gt_ok}/{len(sample)} ({dict(gt_kinds)}); "
          f"hints-removed: {dict(hr)}; "
          f"{2 * len(sample) / elapsed:.2f} checks/s with {jobs} job(s)")  # fmt: skip
    # overhead: the same dafny command directly, on a few tasks
    probe = _spread(sample, min(3, len(sample)))
    sb_t = plain_t = 0.0
    for t in probe:
        a = time.perf_counter()
        ev.verifier.verify(t.reference)
        sb_t += time.perf_counter() - a
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "task.dfy").write_text(t.reference)
            a = time.perf_counter()
            subprocess.run(ev.verifier.argv(), cwd=d, capture_output=True)
            plain_t += time.perf_counter() - a
    print(f"[dafny] sandboxed {sb_t / len(probe):.2f}s vs plain {plain_t / len(probe):.2f}s per run -> "
          f"overhead x{sb_t / plain_t:.2f}")  # fmt: skip
    return {"tasks": len(sample), "ground_truth_verifies": gt_ok, "ground_truth": dict(gt_kinds), "hints_removed": dict(hr),
            "checks_per_s": 2 * len(sample) / elapsed, "overhead_ratio": sb_t / plain_t}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code-n", type=int, default=40, help="generated tasks for the throughput figure")
    ap.add_argument("--pytest-n", type=int, default=5, help="QuixBugs programs timed under real pytest")
    ap.add_argument("--dafny-n", type=int, default=8, help="DafnyBench pairs sampled (see --dafny-all)")
    ap.add_argument("--dafny-all", action="store_true", help="every DafnyBench pair")
    ap.add_argument("--jobs", type=int, default=1, help="parallel Dafny checks")
    ap.add_argument("--skip", nargs="*", default=[], choices=["code", "quixbugs", "hostile", "dafny"])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    print(f"sandbox isolation here: {Sandbox().isolation}")
    figures: dict[str, Any] = {}
    if "code" not in args.skip:
        figures["code"] = bench_code(args.code_n)
    if "hostile" not in args.skip:
        figures["hostile"] = bench_hostile()
    if "quixbugs" not in args.skip:
        figures["quixbugs"] = bench_quixbugs(args.pytest_n)
    if "dafny" not in args.skip:
        figures["dafny"] = bench_dafny(None if args.dafny_all else args.dafny_n, args.jobs)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
