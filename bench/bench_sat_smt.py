"""Benchmark the SAT and SMT world models (issues 6, 13, 14). Prints figures; asserts nothing.

1. Every folder of the shared data (``sat/*``, ``smt/*``), loaded as a user would with
   ``--data FOLDER``: files read, tasks loaded and dropped (their reference does not decide within
   the allowance), references solved, answers judged wrong (the solver, called directly with the
   same configuration, gives the right answer and the world model does not score it solved: must
   be 0), over budget, undecided, and the time per check against calling the solver directly
   (python-sat / z3 in-process on the same parsed input, same budget) in the same run.
2. The hostile corpus (`cm_gym.domains.{sat,smt}.hostile`): probes tried / contained per class
   and the worst wall time and peak memory of a single check under the default bounds.
3. The cost of isolation per check: the evaluator with its checks in the killable worker against
   the same evaluator checking in-process (target <= 1.3x), on generated and real tasks.

Usage: python bench/bench_sat_smt.py [--folders sat/uf20-91 smt/AUFLIA ...] [--limit N]
       [--sections 1 2 3]
"""

from __future__ import annotations

import argparse
import collections
import functools
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import z3
from pysat.solvers import Solver

from cm_gym.core.paths import data_root
from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.registry import get_benchmark
from cm_gym.domains.sat import hostile as sat_hostile
from cm_gym.domains.sat.dimacs import cached_cnf
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.loader import load_satlib_tasks, satlib_task
from cm_gym.domains.sat.solver import parse_config as parse_sat_config
from cm_gym.domains.smt import hostile as smt_hostile
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.loader import load_smtlib_tasks, smtlib_task
from cm_gym.domains.smt.smtlib import file_text, parse_smtlib
from cm_gym.domains.smt.solver import make_solver
from cm_gym.domains.smt.solver import parse_config as parse_smt_config


# -- direct solver calls (the baseline) ----------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _clauses(path: str) -> list[list[int]]:
    """A file's clauses, built once (as a user of python-sat keeps a formula it parsed)."""
    return cached_cnf(path).clauses()


def direct_sat(task: Task) -> str:
    cfg = parse_sat_config(task.reference)
    with Solver(name=cfg.solver, bootstrap_with=_clauses(str(task.meta["path"]))) as s:
        s.conf_budget(cfg.budget)
        answer = s.solve_limited()
        if answer:
            s.get_model()
    return {True: "sat", False: "unsat", None: "unknown"}[answer]


def direct_smt(task: Task) -> str:
    ctx = z3.Context()
    s = make_solver(parse_smt_config(task.reference), ctx)
    s.add(z3.parse_smt2_string(file_text(str(task.meta["path"])), ctx=ctx))
    answer = str(s.check())
    if answer == "sat":
        s.model()
    return answer


def right_answer(task: Task, verdict: str) -> bool:
    """The direct call's answer is right: decided, and not against the header's status."""
    status = str(task.meta.get("status", "unknown"))
    return verdict in ("sat", "unsat") and status in ("unknown", verdict)


# -- 1. every shared folder ------------------------------------------------------------------------
def folder_row(kind: str, folder: Path, limit: int | None) -> dict[str, Any]:
    report = LoadReport()
    t0 = time.perf_counter()
    if kind == "sat":
        tasks = load_satlib_tasks(root=folder, report=report)
        evaluator: Any = SatEvaluator()
        evaluator.memo.size = 0  # time every check
        direct: Callable[[Task], str] = direct_sat
    else:
        tasks = load_smtlib_tasks(root=folder, report=report)
        evaluator, direct = SmtEvaluator(), direct_smt
        evaluator.memo.size = 0  # time every check
    load_s = time.perf_counter() - t0
    tasks = tasks[:limit] if limit is not None else tasks
    counts: collections.Counter[str] = collections.Counter()
    ours_s: list[float] = []
    direct_s: list[float] = []
    wrong: list[str] = []
    for task in tasks:
        t0 = time.perf_counter()
        outcome = evaluator.check(AgentState(task), Action(task.reference))
        t1 = time.perf_counter()
        verdict = direct(task)
        t2 = time.perf_counter()
        ours_s.append(t1 - t0)
        direct_s.append(t2 - t1)
        if outcome.solved:
            counts["solved"] += 1
        elif outcome.status in ("budget", "timeout"):
            counts["over budget"] += 1
        elif outcome.status == "undecided":
            counts["undecided"] += 1
        if right_answer(task, verdict) and not outcome.solved and outcome.status != "undecided":
            counts["judged wrong"] += 1
            wrong.append(f"{task.task_id}: {outcome.status}: {outcome.reason[:80]}")
    evaluator.close()
    return {
        "folder": f"{kind}/{folder.name}",
        "files": len(tasks) + len(report.dropped) + len(report.refused),
        "loaded": len(tasks),
        "dropped": len(report.dropped),
        "refused": len(report.refused),
        "disagree": len(report.disagreements),
        **{k: counts[k] for k in ("solved", "judged wrong", "over budget", "undecided")},
        "ours_ms": 1e3 * statistics.mean(ours_s) if ours_s else 0.0,
        "direct_ms": 1e3 * statistics.mean(direct_s) if direct_s else 0.0,
        "ratio": sum(ours_s) / sum(direct_s) if direct_s and sum(direct_s) else float("nan"),
        "load_s": load_s,
        "wrong": wrong,
        "notes": [n for _, n in report.notes if n.startswith("allowance")],
    }


def section_folders(names: Sequence[str], limit: int | None) -> None:
    print("1. Every shared folder loaded with --data (reference configuration; ms = mean per check)")
    head = (
        f"  {'folder':<17}{'files':>6}{'loaded':>7}{'dropped':>8}{'solved':>7}{'wrong':>6}{'budget':>7}"
        f"{'undec.':>7}{'disagr.':>8}{'ours ms':>9}{'direct ms':>10}{'ratio':>7}{'load s':>8}"
    )
    print(head)
    for name in names:
        kind, _, sub = name.partition("/")
        r = folder_row(kind, data_root() / kind / sub, limit)
        print(
            f"  {r['folder']:<17}{r['files']:>6}{r['loaded']:>7}{r['dropped']:>8}{r['solved']:>7}"
            f"{r['judged wrong']:>6}{r['over budget']:>7}{r['undecided']:>7}{r['disagree']:>8}"
            f"{r['ours_ms']:>9.1f}{r['direct_ms']:>10.1f}{r['ratio']:>7.2f}{r['load_s']:>8.1f}"
        )
        for line in r["notes"] + r["wrong"]:
            print(f"      {line}")


# -- 2. hostile corpus -----------------------------------------------------------------------------
class PeakMemory:
    """Samples the checking worker's resident size every 20 ms while a check runs (the worker's
    own peak is lost when it is killed at the deadline, so it is watched from outside)."""

    def __init__(self, checks: Any) -> None:
        self.checks, self.peak_mb, self._stop = checks, 0.0, threading.Event()

    def __enter__(self) -> PeakMemory:
        self.checks._get_worker().start()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            pid = self.checks._get_worker().pid
            try:
                with open(f"/proc/{pid}/status") as f:
                    rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
                self.peak_mb = max(self.peak_mb, rss / 1024)
            except (OSError, StopIteration, ValueError, TypeError):
                pass

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def section_probes(tmp: Path) -> None:
    print("\n2. Hostile corpus under the default bounds (SAT 30 s / 1 GB, SMT 60 s / 2 GB + 512 MB)")
    smt, sat = SmtEvaluator(), SatEvaluator()
    smt.memo.size = sat.memo.size = 0  # time every check
    tried: collections.Counter[str] = collections.Counter()
    held: collections.Counter[str] = collections.Counter()
    worst: dict[str, tuple[float, float, str]] = {"sat": (0.0, 0.0, ""), "smt": (0.0, 0.0, "")}

    def note(domain: str, klass: str, name: str, ok: bool, checks: Any, peak: float = 0.0) -> None:
        tried[f"{domain}/{klass}"] += 1
        held[f"{domain}/{klass}"] += int(ok)
        wall = checks.last_wall_s
        w, p, _ = worst[domain]
        worst[domain] = (max(w, wall), max(p, peak), name if wall >= w else worst[domain][2])

    task = smt_hostile.hostile_task()
    for probe in smt_hostile.SCRIPTS:
        with PeakMemory(smt._checks) as mem:
            o = smt.check(AgentState(task), Action(probe.text))
        ok = not o.solved and (o.status == "refused" if probe.expect == "refused" else True)
        note("smt", probe.klass, probe.name, ok, smt._checks, mem.peak_mb)
    for probe in smt_hostile.BENCHMARKS:
        path = tmp / f"{probe.name}.smt2"
        path.write_text(probe.text)
        t = smtlib_task(parse_smtlib(probe.text, str(path)), "h", 200_000_000)
        with PeakMemory(smt._checks) as mem:
            o = smt.check(AgentState(t), Action("logic: QF_BV\nrlimit: 200000000"))
        note("smt", probe.klass, probe.name, o.status in ("timeout", "budget"), smt._checks, mem.peak_mb)
    public = data_root() / "smt" / "BV" / "sat" / "network_ndis_e100bex_5x_kd_mp_dbg.c.smt2"
    if public.is_file():
        t = smtlib_task(parse_smtlib(public.read_text(), str(public)), "public", 20_000_000)
        with PeakMemory(smt._checks) as mem:
            o = smt.check(AgentState(t), Action("logic: BV\nrlimit: 20000000"))
        note("smt", "time", f"public BV file ({o.status})", o.status != "error", smt._checks, mem.peak_mb)
    for probe in sat_hostile.TEXTS:
        fam = tmp / "hostile" / probe.name
        fam.mkdir(parents=True)
        (fam / "x.cnf").write_text(probe.build(1.0))
        report = LoadReport()
        tasks = load_satlib_tasks(root=fam, report=report)
        ok = (not tasks and len(report.refused) == 1) if probe.expect == "refused" else len(tasks) == 1
        with PeakMemory(sat._checks) as mem:
            if tasks:
                sat.check(AgentState(tasks[0]), Action(tasks[0].reference))
        note("sat", probe.klass, probe.name, ok, sat._checks, mem.peak_mb)
    for kind in sat_hostile.SPECIAL_FILES:
        fam = tmp / "special" / kind
        fam.mkdir(parents=True)
        sat_hostile.make_special(kind, fam)
        report = LoadReport()
        ok = load_satlib_tasks(root=fam.parent, families=[kind], report=report) == []
        note("sat", "special-file", kind, ok, sat._checks)
    hard = tmp / "hard.cnf"
    hard.write_text(sat_hostile.hard_instance())
    t = satlib_task(cached_cnf(str(hard)), "hard", hard, 10_000_000)
    with PeakMemory(sat._checks) as mem:
        o = sat.check(AgentState(t), Action("solver: minisat22\nbudget: 10000000"))
    note("sat", "time", "random 3-SAT n=350 (10M conflicts)", o.status == "timeout", sat._checks, mem.peak_mb)
    for key in sorted(tried):
        print(f"  {key:<22} tried {tried[key]:>3}  contained {held[key]:>3}")
    for domain, (wall, peak, name) in worst.items():
        print(
            f"  worst single {domain.upper()} check: {wall:.2f} s wall ({name}); "
            f"peak worker memory (resident, sampled every 20 ms) {peak:.0f} MB"
        )
    smt.close()
    sat.close()


# -- 3. isolation cost -----------------------------------------------------------------------------
def paired(items: Sequence[Task], a: Any, b: Any, repeats: int) -> tuple[float, float]:
    """Total best-of-`repeats` time per item of evaluator `a` and `b`, interleaved item by item."""
    best_a = [float("inf")] * len(items)
    best_b = [float("inf")] * len(items)
    for _ in range(repeats):
        for i, t in enumerate(items):
            t0 = time.perf_counter()
            a.check(AgentState(t), Action(t.reference))
            t1 = time.perf_counter()
            b.check(AgentState(t), Action(t.reference))
            t2 = time.perf_counter()
            best_a[i], best_b[i] = min(best_a[i], t1 - t0), min(best_b[i], t2 - t1)
    return sum(best_a), sum(best_b)


def section_isolation(repeats: int) -> None:
    print(
        "\n3. Cost of isolation: checks in the killable worker vs the same checks in-process (best of",
        repeats,
        ")",
    )
    sets: list[tuple[str, Any, Any, list[Task]]] = [
        ("SAT encoding", SatEvaluator, {}, list(get_benchmark("SAT").load_tasks())[::10]),
        ("SATLIB uf50-218", SatEvaluator, {}, load_satlib_tasks(families=["uf50-218"], limit=60)),
        ("SATLIB flat100-239", SatEvaluator, {}, load_satlib_tasks(families=["flat100-239"], limit=30)),
        ("SMT encoding", SmtEvaluator, {}, list(get_benchmark("SMT").load_tasks())[::10]),
        ("SMTLIB QF_LRA", SmtEvaluator, {}, load_smtlib_tasks(logics=["QF_LRA"], limit=30)),
        ("SMTLIB QF_BV", SmtEvaluator, {}, load_smtlib_tasks(logics=["QF_BV"], limit=30)),
    ]
    for label, cls, kw, tasks in sets:
        isolated, inline = cls(**kw), cls(isolated=False, **kw)
        for t in tasks[:3]:  # warm both (worker start, caches)
            isolated.check(AgentState(t), Action(t.reference))
            inline.check(AgentState(t), Action(t.reference))
        ours, base = paired(tasks, isolated, inline, repeats)
        n = len(tasks)
        print(
            f"  {label:<20} n={n:<4} isolated {1e3 * ours / n:7.2f} ms  in-process {1e3 * base / n:7.2f} ms  "
            f"ratio {ours / base:5.2f}x  (+{1e3 * (ours - base) / n:.2f} ms/check)"
        )
        isolated.close()


FOLDERS = [
    "sat/uf20-91", "sat/uf50-218", "sat/uuf50-218", "sat/flat30-60", "sat/flat100-239",
    "smt/QF_LIA", "smt/QF_LRA", "smt/QF_BV", "smt/AUFLIA", "smt/LRA", "smt/BV", "smt/QF_NRA",
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folders", nargs="+", default=FOLDERS, help="kind/folder under the data root")
    ap.add_argument("--limit", type=int, default=None, help="check at most N tasks per folder")
    ap.add_argument("--sections", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if 1 in args.sections:
        section_folders(args.folders, args.limit)
    if 2 in args.sections:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="cm_gym_bench_") as tmp:
            section_probes(Path(tmp))
    if 3 in args.sections:
        section_isolation(args.repeats)


if __name__ == "__main__":
    main()
