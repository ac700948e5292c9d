"""Issue 14's figures for the code, Dafny and SQL world models, each against the code before
issue 14 (a ``git archive`` of `--legacy-ref`, run in subprocesses of this script in the same run).

Prints:
1. probes tried / contained per class and world model, now and on the legacy code (for Dafny,
   the probes the legacy checker accepted are also run through Dafny to show what they scored);
2. the worst wall time and peak memory of any single check per world model under the probes;
3. the cost of the new isolation per check as a ratio to the legacy code: SQL (every Spider gold
   query, CPU time, repeated and first pass), code (generated tasks' references, wall time), Dafny
   (the annotation check alone over all ground truths, and whole checks with the verifier).

    python bench/bench_isolation.py                 # everything (~10 min here)
    python bench/bench_isolation.py --quick         # fewer rounds and samples
    python bench/bench_isolation.py --legacy-ref 6e566f6
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

LEGACY_REF = "6e566f6"  # main before issue 14
CODE_LIMITS = {"wall_s": 4.0, "cpu_s": 4.0, "memory_mb": 256, "max_procs": 16, "max_file_mb": 4}
CODE_CLASS = {
    "frame_walk_forges_pass": "verdict forged: frame walking",
    "overwrite_comparison_helpers": "verdict forged: comparison helpers",
    "overwrite_builtins_used_by_the_runner": "verdict forged: comparison helpers",
    "monkeypatch_runner": "verdict forged: comparison helpers",
    "monkeypatch_json": "verdict forged: comparison helpers",
    "always_equal": "verdict forged: comparison helpers",
    "int_subclass": "verdict forged: comparison helpers",
    "peek_caller_frames": "verdict forged: frame walking",
    "fake_report_stdout": "verdict forged: fake reports",
    "fake_report_fds": "verdict forged: fake reports",
    "reads_the_data_folder": "answers read from disk",
    "reads_the_package_references": "answers read from disk",
    "reads_another_tasks_copy": "answers read from disk",
    "reads_the_cache": "answers read from disk",
    "forged_deeply_nested_value_crashes_the_parent": "parent crash",
    "deeply_nested_return_value": "parent crash",
    "unary_operator_tower_in_the_action": "parent crash",
    "memory_multiplied_by_forks": "memory via forks",
    "fork_bomb": "memory via forks",
    "fork_bomb_at_import": "memory via forks",
    "thread_bomb": "memory via forks",
    "huge_allocation": "memory via forks",
    "memory_growth": "memory via forks",
}


# -- measurements (run here, or in a subprocess on the legacy tree) ----------------------------
def code_probes() -> list[dict[str, Any]]:
    from cm_gym.domains.code import hostile_forgery
    from cm_gym.domains.code.evaluator import CodeEvaluator
    from cm_gym.domains.code.hostile import CORPUS
    from cm_gym.domains.code.hostile_check import check_patch
    from cm_gym.evaluators import testrun
    from cm_gym.evaluators.sandbox import Limits

    if hasattr(testrun, "rewrite_asserts"):  # the legacy design ran rewritten asserts in the sandbox
        hostile_forgery._TEST_FILE = testrun.rewrite_asserts(hostile_forgery._TEST_FILE)
    ev = CodeEvaluator(limits=Limits(**CODE_LIMITS))
    legacy = "minimal-root" not in ev.sandbox.isolation
    out = []
    for patch in (*CORPUS, *hostile_forgery.FORGERY):
        if legacy and patch.needs == ("fs",):  # no such layer there: the reads are tried anyway
            patch = dataclasses.replace(patch, needs=())
        t0 = time.perf_counter()
        try:
            r = check_patch(ev, patch)
        except BaseException as exc:  # noqa: BLE001 - the legacy evaluator raised: not contained
            out.append({"name": patch.name, "contained": False, "why": f"raised {type(exc).__name__}",
                        "wall_s": time.perf_counter() - t0})  # fmt: skip
            continue
        if r.skipped:
            out.append({"name": patch.name, "skipped": r.skipped})
            continue
        o = r.outcome
        assert o is not None
        out.append({"name": patch.name, "contained": r.contained, "why": "; ".join(r.violations) or o.feedback[:80],
                    "wall_s": r.seconds, "peak_mb": o.details.get("peak_rss_mb")})  # fmt: skip
    return out


def dafny_probes() -> list[dict[str, Any]]:
    from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
    from cm_gym.domains.dafny.hostile import PROBES

    out = []
    for name, kind, program, action in PROBES:
        t0 = time.perf_counter()
        try:
            extract_annotations(program, action)
            refused, why = False, "accepted"
        except AnnotationError as exc:
            refused, why = True, str(exc)[:80]
        out.append({"name": name, "class": kind, "contained": refused, "why": why,
                    "wall_s": time.perf_counter() - t0, "action": action})  # fmt: skip
    return out


def sql_probe(sql: str, memory: bool) -> dict[str, Any]:
    import resource
    import sqlite3

    from cm_gym.core.types import Action, AgentState, Task
    from cm_gym.domains.sql.evaluator import SQLEvaluator

    d = tempfile.mkdtemp()
    db = os.path.join(d, "t.sqlite")
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE people(id INTEGER, name TEXT); INSERT INTO people VALUES (1,'Ann'),(2,'Bob');"
    )
    conn.commit()
    conn.close()
    task = Task(
        "probe", "sql", "q", "probe", "SELECT name FROM people", meta={"db_path": db, "immutable": False}
    )
    ev = SQLEvaluator()
    ev.memo.size = 0  # time every check (the verdict memo would answer repeats)
    if hasattr(ev, "worker"):
        ev.worker.track_memory = True
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    o = ev.check(AgentState(task), Action(sql))
    wall = time.perf_counter() - t0
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    worker_peak = (getattr(ev, "last_run", {}) or {}).get("peak_mb") or 0.0
    peak = max(grown, worker_peak)
    return {
        "status": o.status,
        "reason": o.reason[:80],
        "wall_s": wall,
        "parent_grew_mb": grown,
        "peak_mb": peak,
    }


def sql_cost(rounds: int) -> dict[str, Any]:
    from cm_gym.core.types import Action, AgentState
    from cm_gym.domains.sql import load_spider_tasks
    from cm_gym.domains.sql.evaluator import SQLEvaluator

    tasks = load_spider_tasks()
    ev = SQLEvaluator()
    ev.memo.size = 0  # time every check (the verdict memo would answer repeats)
    states = [(AgentState(t), Action(t.reference)) for t in tasks]
    t0 = time.process_time()
    for s, a in states:
        ev.check(s, a)
    first = (time.process_time() - t0) / len(states) * 1e6  # cold: references computed, nothing cached
    per = []
    for _ in range(rounds):
        t0 = time.process_time()
        for s, a in states:
            ev.check(s, a)
        per.append((time.process_time() - t0) / len(states) * 1e6)
    return {"us_per_check": statistics.median(per), "first_pass_us": first, "checks": len(states)}


def code_cost(n: int) -> dict[str, Any]:
    from cm_gym.core.types import Action, AgentState
    from cm_gym.domains.code.evaluator import CodeEvaluator
    from cm_gym.domains.code.generated import load_generated_tasks

    tasks = load_generated_tasks()
    sample = [tasks[int(i * len(tasks) / n)] for i in range(n)]
    ev = CodeEvaluator()
    ev.check(AgentState(sample[0]), Action(sample[0].reference))  # warm-up (probing, judge start)
    t0 = time.perf_counter()
    solved = sum(ev.check(AgentState(t), Action(t.reference)).solved for t in sample)
    return {"ms_per_check": (time.perf_counter() - t0) / n * 1e3, "solved": solved, "checks": n}


def dafny_check_cost(n: int) -> dict[str, Any]:
    """Whole Dafny checks (annotation check + the verifier in the sandbox) on `n` short tasks."""
    from cm_gym.core.types import Action, AgentState
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator
    from cm_gym.domains.dafny.loader import load_dafny_tasks

    tasks = sorted(load_dafny_tasks(), key=lambda t: (len(t.reference), t.task_id))[:n]
    ev = DafnyEvaluator()
    t0 = time.perf_counter()
    solved = sum(ev.check(AgentState(t), Action(t.reference)).solved for t in tasks)
    return {"s_per_check": (time.perf_counter() - t0) / n, "solved": solved}


def dafny_cost(n: int) -> dict[str, Any]:
    from cm_gym.domains.dafny.annotations import extract_annotations
    from cm_gym.domains.dafny.loader import load_dafny_tasks

    tasks = load_dafny_tasks()
    t0 = time.perf_counter()
    for t in tasks[:n]:
        with contextlib.suppress(Exception):  # refused ground truths cost the same
            extract_annotations(t.meta["program"], t.reference)
    return {"us_per_check": (time.perf_counter() - t0) / n * 1e6, "checks": n}


WORKERS = {"code-probes": lambda a: code_probes(), "dafny-probes": lambda a: dafny_probes(),
           "sql-probe": lambda a: sql_probe(a["sql"], True), "sql-cost": lambda a: sql_cost(a["rounds"]),
           "code-cost": lambda a: code_cost(a["n"]), "dafny-cost": lambda a: dafny_cost(a["n"]),
           "dafny-check-cost": lambda a: dafny_check_cost(a["n"])}  # fmt: skip


# -- orchestration -------------------------------------------------------------------------------
def run_in(tree: str | None, mode: str, args: dict[str, Any], timeout: float) -> Any:
    """`mode` in a fresh subprocess on `tree` (None: this checkout); None when it ran past `timeout`."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, json.dumps(args)]
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=tree or None)
    except subprocess.TimeoutExpired:
        return None
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("@@")]
    if not lines:
        return {"error": res.stderr.strip().splitlines()[-1:] or ["no output"]}
    return json.loads(lines[-1][2:])


def legacy_tree(ref: str) -> str:
    root = Path(__file__).resolve().parents[1]
    dest = tempfile.mkdtemp(prefix="cm_gym_legacy_")
    archive = subprocess.run(["git", "-C", str(root), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    # the legacy tree gets today's probe corpora (data + checker), never today's evaluators
    for rel in ("cm_gym/domains/code/hostile.py", "cm_gym/domains/code/hostile_check.py",
                "cm_gym/domains/code/hostile_forgery.py", "cm_gym/domains/dafny/hostile.py",
                "cm_gym/domains/sql/probes.py"):  # fmt: skip
        (Path(dest) / rel).write_text((root / rel).read_text())
    return dest


def _table(title: str, rows: list[tuple[str, str, int, int, str]]) -> None:
    print(f"\n== {title}")
    print(f"{'world model':11s} {'class':38s} {'tried':>5s} {'now':>5s} {'legacy':>7s}")
    for wm, cls, tried, now, legacy in rows:
        print(f"{wm:11s} {cls:38s} {tried:5d} {now:5d} {legacy:>7s}")


def probes_section(legacy: str | None, dafny_check: bool) -> None:
    rows: list[tuple[str, str, int, int, str]] = []
    worst: dict[str, tuple[float, float]] = {}
    # code
    now = run_in(None, "code-probes", {}, 1200) or []
    old = run_in(legacy, "code-probes", {}, 1800) if legacy else None
    old_by = {r["name"]: r for r in old} if isinstance(old, list) else {}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in now:
        groups[CODE_CLASS.get(r["name"], "escape / resources (issue 7 corpus)")].append(r)
    for cls, rs in sorted(groups.items()):
        ran = [r for r in rs if "skipped" not in r]
        olds = [old_by.get(r["name"], {}) for r in ran]
        legacy_col = f"{sum(bool(o.get('contained')) for o in olds)}/{len(ran)}" if old_by else "-"
        rows.append(("code", cls, len(ran), sum(r["contained"] for r in ran), legacy_col))
        for r in ran:
            if not r["contained"]:
                print(f"  code NOT CONTAINED: {r['name']}: {r['why']}")
    ran = [r for r in now if "skipped" not in r]
    worst["code"] = (max(r["wall_s"] for r in ran), max(r.get("peak_mb") or 0.0 for r in ran))
    # dafny
    dnow = run_in(None, "dafny-probes", {}, 600) or []
    dold = run_in(legacy, "dafny-probes", {}, 600) if legacy else None
    dold_by = {r["name"]: r for r in dold} if isinstance(dold, list) else {}
    dgroups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in dnow:
        dgroups[r["class"]].append(r)
    for cls, rs in sorted(dgroups.items()):
        legacy_col = f"{sum(dold_by[r['name']]['contained'] for r in rs)}/{len(rs)}" if dold_by else "-"
        rows.append(("dafny", cls, len(rs), sum(r["contained"] for r in rs), legacy_col))
    worst["dafny"] = (max(r["wall_s"] for r in dnow), 0.0)
    if dafny_check and dold_by:
        _dafny_verdicts([r for r in dold_by.values() if not r["contained"]])
    # sql
    from cm_gym.domains.sql.probes import BACKTRACKING, MEMORY, UNINTERRUPTIBLE

    sql_wall, sql_peak = 0.0, 0.0
    for cls, probes, ok in (("regex backtracking in vetting", BACKTRACKING, ("error", "refused")),
                            ("uninterruptible SQLite call", UNINTERRUPTIBLE, ("timeout",)),
                            ("memory blow-up", MEMORY, ("budget", "timeout"))):  # fmt: skip
        now_ok = old_ok = 0
        for sql in probes:
            r = run_in(None, "sql-probe", {"sql": sql}, 120)
            good = r is not None and r.get("status") in ok and r["wall_s"] < 10 and r["parent_grew_mb"] < 200
            now_ok += good
            if r:
                sql_wall, sql_peak = max(sql_wall, r["wall_s"]), max(sql_peak, r["peak_mb"])
            if legacy:
                o = run_in(legacy, "sql-probe", {"sql": sql}, 60)
                old_ok += (
                    o is not None and o.get("status") in ok and o["wall_s"] < 5 and o["parent_grew_mb"] < 200
                )
        rows.append(("sql", cls, len(probes), now_ok, f"{old_ok}/{len(probes)}" if legacy else "-"))
    worst["sql"] = (sql_wall, sql_peak)
    _table("1. probes contained per class (legacy: the same probes on the code before issue 14)", rows)
    print("\n== 2. worst single check under the probes (wall s, peak MB)")
    for wm, (w, m) in worst.items():
        print(f"{wm:6s} worst wall {w:7.3f} s   peak memory {m:7.1f} MB")
    print(
        "   (code: the sandboxed run's summed resident memory, sampled every 50 ms, cap 256 MB;"
        " dafny: refused before the verifier runs; sql: the larger of the evaluator's growth and"
        " the worker's peak resident size, cap 512 MB above its start-up size)"
    )


def _dafny_verdicts(accepted: list[dict[str, Any]]) -> None:
    from cm_gym.domains.dafny.verifier import DafnyVerifier

    try:
        verifier = DafnyVerifier()
    except Exception as exc:  # noqa: BLE001 - no dafny here
        print(f"  (dafny not available: {exc})")
        return
    for r in accepted:
        report, _ = verifier.verify(r["action"])
        print(f"  legacy accepted {r['name']}: Dafny says {'VERIFIED' if report.solved else 'not verified'}")


def cost_section(legacy: str | None, rounds: int, code_n: int) -> None:
    print("\n== 3. cost per check, new / legacy (alternating subprocesses, medians)")
    for mode, key, args in (("sql-cost", "us_per_check", {"rounds": 3}), ("sql-cost", "first_pass_us", {"rounds": 1}),
                            ("code-cost", "ms_per_check", {"n": code_n}), ("dafny-cost", "us_per_check", {"n": 445}),
                            ("dafny-check-cost", "s_per_check", {"n": 3})):  # fmt: skip
        new, old = [], []
        for _ in range(rounds):
            r = run_in(None, mode, args, 1800)
            if r and key in r:
                new.append(r[key])
            if legacy:
                o = run_in(legacy, mode, args, 1800)
                if o and key in o:
                    old.append(o[key])
        unit = {"us_per_check": "us", "first_pass_us": "us", "ms_per_check": "ms", "s_per_check": "s"}[key]
        if new and old:
            n, o = statistics.median(new), statistics.median(old)
            print(f"{mode:16s} {key:14s} new {n:9.2f} {unit}  legacy {o:9.2f} {unit}  ratio {n / o:5.2f}x  (target <= 1.3x; "
                  f"runs new={[round(x, 1) for x in new]} legacy={[round(x, 1) for x in old]})")  # fmt: skip
        else:
            print(f"{mode:11s} new {new}  legacy {old}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--legacy-ref", default=LEGACY_REF, help="git ref of the code before issue 14 ('' to skip)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-dafny", action="store_true", help="do not run Dafny on legacy-accepted probes")
    parser.add_argument("--only", choices=("probes", "cost"), default=None)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("@@" + json.dumps(WORKERS[args.worker[0]](json.loads(args.worker[1])), default=str))
        return 0
    legacy = legacy_tree(args.legacy_ref) if args.legacy_ref else None
    print(f"legacy tree: {args.legacy_ref or '-'} at {legacy}")
    if args.only in (None, "probes"):
        probes_section(legacy, not args.no_dafny)
    if args.only in (None, "cost"):
        cost_section(legacy, 2 if args.quick else 3, 10 if args.quick else 30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
