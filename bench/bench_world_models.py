"""Each world model's CPU cost against its raw tool on the same inputs, in the same run (issue 35).

For every world model (SQL on SQLite, SAT on python-sat, SMT on z3) and every family of the shared
data (`CM_GYM_DATA`: Spider golds and one real system's predictions; each SATLIB family; each
SMT-LIB logic folder), every input is checked by the cm_gym world model and handed to the raw tool
(the same engine called directly, as a user without cm_gym would: one reused read-only sqlite3
connection with ``execute().fetchall()``; python-sat's ``solve_limited`` under the same conflict
budget on the same clauses; z3 on the same file under the same configuration), interleaved input
by input and alternating which goes first, after one warm-up pass (reference results, parsed
files and worker processes ready on both sides). CPU seconds are those of this process *and* of
the world model's worker processes (a SAT or SMT check runs in a killable worker; its CPU counts:
read through the kernel's per-process CPU clock, nanosecond resolution), wall seconds beside them.
Per family: CPU and wall per input, the CPU ratio world model / raw tool (median over rounds) and
the target (<= 1.3x).

Verdicts: every check's (status, score, solved) is recorded; ``--verdicts-out FILE`` writes them,
``--verdicts-against FILE`` counts the inputs whose verdict differs from that file's (must be 0
after a speed change: run this script with ``PYTHONPATH`` at the old tree to write the file). For
SAT and SMT, "raw disagrees" counts inputs where the raw tool decided and the world model's
``details["verdict"]`` says otherwise (must be 0).

The SQL predictions are also split by kind of answer (`sql_kind`: rows identical to the
reference's, rows the check compares and explains, SQL errors), each kind's CPU summed over the
family's own interleaved rounds; ``--split-kinds`` also times each kind in a pass of its own (the
kinds cost differently mixed than alone: docs/speed.md, fourteenth round).

Usage: python bench/bench_world_models.py [--quick] [--only sql sat smt] [--rounds 3]
       [--sat-limit N] [--smt-limit N] [--worst N] [--split-kinds] [--verdicts-out F]
       [--verdicts-against F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cm_gym.core.paths import data_root
from cm_gym.core.types import Action, AgentState, Outcome, Task

TARGET = 1.3
SAT_FAMILIES = ("uf20-91", "uf50-218", "uuf50-218", "flat30-60", "flat100-239")
SMT_LOGICS = ("QF_LIA", "QF_LRA", "QF_BV", "AUFLIA", "LRA", "BV", "QF_NRA")
SPIDER_SYSTEM = "gpt-4-zero-shot"
#: also time SAT/SMT checks without their worker (``--in-process``)
IN_PROCESS = False


# -- clocks ------------------------------------------------------------------------------------
def process_cpu_clock(pid: int) -> int:
    """The kernel's CPU-time clock id of another process (Linux: all its threads, in ns); the same
    as `cm_gym.evaluators.cpuclock.process_clock_id`, repeated so that this script also measures
    an older tree (``PYTHONPATH=old/tree``) for the verdict comparison."""
    return ((~pid) << 3) | 2


class Clock:
    """CPU seconds of this process plus those of the processes `pids()` names (the world model's
    workers), and wall seconds. A worker that died between two readings counts 0 from then on."""

    def __init__(self, pids: Callable[[], Iterable[int | None]]) -> None:
        self.pids = pids

    def cpu(self) -> float:
        total = time.process_time()
        for pid in self.pids():
            if pid:
                with contextlib.suppress(OSError):
                    total += time.clock_gettime(process_cpu_clock(pid))
        return total


# -- one family --------------------------------------------------------------------------------
@dataclass
class Group:
    """One family: inputs (task, action text), the world model's check and the raw tool's call.
    `raw` returns the raw tool's answer ("sat"/"unsat"/"unknown" for solvers; anything for SQL)."""

    model: str
    family: str
    items: list[tuple[Task, str]]
    check: Callable[[Task, str], Outcome]
    raw: Callable[[Task, str], Any]
    pids: Callable[[], Iterable[int | None]] = lambda: ()
    close: Callable[[], None] = lambda: None
    compare_verdict: bool = False  # the raw answer and details["verdict"] must agree
    #: the same check without the killable worker (``isolated=False``): what the sandbox costs
    inproc: Callable[[Task, str], Outcome] | None = None
    #: a label per input (its kind of answer: `sql_kind`), printed as a split of the family's CPU
    kinds: list[str] | None = None


@dataclass
class Row:
    """The measured figures of one family."""

    model: str
    family: str
    n: int
    raw_cpu: list[float] = field(default_factory=list)
    ours_cpu: list[float] = field(default_factory=list)
    raw_wall: list[float] = field(default_factory=list)
    ours_wall: list[float] = field(default_factory=list)
    inproc_cpu: list[float] = field(default_factory=list)
    raw_disagree: int = 0
    verdicts: dict[str, list[Any]] = field(default_factory=dict)
    #: per input: its name and the CPU seconds of each side, summed over the rounds
    per_input: list[tuple[str, float, float]] = field(default_factory=list)
    #: per input: its kind (`Group.kinds`), or empty
    kinds: list[str] = field(default_factory=list)

    def ratio(self, ours: list[float], raw: list[float]) -> float:
        values = [o / r for o, r in zip(ours, raw, strict=True) if r > 0]
        return statistics.median(values) if values else float("nan")


def verdict_of(outcome: Outcome) -> list[Any]:
    return [outcome.status, round(float(outcome.score), 6), bool(outcome.solved)]


def measure(group: Group, rounds: int) -> Row:
    """Warm both sides once, then `rounds` interleaved passes (alternating which side goes first
    on each input); per round the total CPU and wall seconds of each side."""
    row = Row(group.model, group.family, len(group.items))
    clock = Clock(group.pids)
    for i, (task, text) in enumerate(group.items):
        outcome = group.check(task, text)
        answer = group.raw(task, text)
        row.verdicts[f"{group.model}/{group.family}/{task.task_id}#{i}"] = verdict_of(outcome)
        ours = outcome.details.get("verdict") if outcome.details else None
        if group.compare_verdict and answer in ("sat", "unsat") and ours in ("sat", "unsat", "unknown"):
            row.raw_disagree += ours != answer
    calls = [group.check, group.raw] + ([group.inproc] if group.inproc is not None else [])
    k = len(calls)
    if group.inproc is not None:
        for task, text in group.items:
            group.inproc(task, text)  # warm its caches too
    each = [[0.0, 0.0] for _ in group.items]
    for r in range(rounds):
        cpu_sum, wall_sum = [0.0] * k, [0.0] * k  # per side: ours, raw, in-process
        for i, (task, text) in enumerate(group.items):
            for j in range(k):
                side = (i + r + j) % k  # each side goes first as often as the others
                c0, w0 = clock.cpu(), time.perf_counter()
                calls[side](task, text)
                w1 = time.perf_counter()
                cpu = clock.cpu() - c0
                cpu_sum[side] += cpu
                wall_sum[side] += w1 - w0
                if side < 2:
                    each[i][side] += cpu
        row.ours_cpu.append(cpu_sum[0])
        row.raw_cpu.append(cpu_sum[1])
        row.ours_wall.append(wall_sum[0])
        row.raw_wall.append(wall_sum[1])
        if k == 3:
            row.inproc_cpu.append(cpu_sum[2])
    row.per_input = [(t.task_id, o, w) for (t, _), (o, w) in zip(group.items, each, strict=True)]
    row.kinds = list(group.kinds or [])
    group.close()
    return row


def kind_split(row: Row) -> list[tuple[str, int, float, float]]:
    """Per kind of input (`Row.kinds`, first-seen order): (kind, inputs, our CPU, the raw tool's
    CPU), summed over the inputs and rounds of the family's own interleaved measurement."""
    out: dict[str, list[float]] = {}
    for kind, (_, ours, raw) in zip(row.kinds, row.per_input, strict=True):
        acc = out.setdefault(kind, [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += ours
        acc[2] += raw
    return [(kind, int(n), ours, raw) for kind, (n, ours, raw) in out.items()]


# -- SQL ---------------------------------------------------------------------------------------
def sql_groups(
    limit: int | None, tasks: list[Task] | None = None, with_predictions: bool = True
) -> list[Group]:
    """Spider's gold queries (`tasks`, default the shared Spider folder's) and one system's
    predictions on them, as SQL checks and as plain sqlite3 on one reused read-only connection per
    database."""
    from cm_gym.domains.sql import load_spider_tasks
    from cm_gym.domains.sql.evaluator import SQLEvaluator
    from cm_gym.domains.sql.schema import ro_uri

    tasks = (tasks if tasks is not None else load_spider_tasks())[:limit]
    by_gold = {(Path(t.meta["db_path"]).stem, t.reference): t for t in tasks}
    predicted: list[tuple[Task, str]] = []
    pred_file = data_root() / "llm-outputs" / "spider" / "predictions.jsonl"
    if with_predictions and pred_file.is_file():
        for line in pred_file.read_text().splitlines():
            entry = json.loads(line)
            task = by_gold.get((entry["db_id"], entry["gold"]))
            text = entry.get("predictions", {}).get(SPIDER_SYSTEM)
            if task is not None and isinstance(text, str):
                predicted.append((task, text))
    conns: dict[str, sqlite3.Connection] = {}

    def raw(task: Task, text: str) -> Any:
        path = task.meta["db_path"]
        conn = conns.get(path)
        if conn is None:
            conn = conns[path] = sqlite3.connect(ro_uri(path), uri=True)
        try:
            return conn.execute(text).fetchall()
        except sqlite3.Error as exc:
            return exc

    out = []
    for family, items in (("spider gold", [(t, t.reference) for t in tasks]),
                          (f"spider {SPIDER_SYSTEM}", predicted)):  # fmt: skip
        if not items:
            continue
        kinds = [sql_kind(task, text) for task, text in items] if items is predicted else None
        evaluator = SQLEvaluator()
        evaluator.memo.size = 0  # time every check (the verdict memo would answer repeats)
        out.append(
            Group(
                "SQL",
                family,
                items,
                lambda t, s, ev=evaluator: ev.check(AgentState(t), Action(s)),
                raw,
                pids=lambda ev=evaluator: (ev._worker.pid,) if ev._worker is not None else (),
                close=evaluator.close,
                kinds=kinds,
            )
        )
    return out


#: the kinds of answer `sql_kind` tells apart
SQL_KINDS = ("identical rows", "compared", "error")


def sql_kind(task: Task, text: str) -> str:
    """What plain sqlite3 says of a prediction: "identical rows" (the same column count and row
    list as the reference query: the check's shortest path, no comparison), "compared"
    (other rows, or the same rows in another order: the check compares and explains), or "error"
    (sqlite3 refuses or fails it). On its own read-only connection, outside any timing."""
    from cm_gym.domains.sql.schema import ro_uri

    conn = sqlite3.connect(ro_uri(task.meta["db_path"]), uri=True)
    try:
        got = conn.execute(text)
        got_rows, got_cols = got.fetchall(), len(got.description or ())
        ref = conn.execute(task.reference)
        same = got_cols == len(ref.description or ()) and got_rows == ref.fetchall()
    except (sqlite3.Error, ValueError):
        return "error"
    finally:
        conn.close()
    return SQL_KINDS[0] if same else SQL_KINDS[1]


# -- SAT and SMT -------------------------------------------------------------------------------
def _isolated_group(
    model: str, family: str, tasks: list[Task], evaluator: Any, raw: Callable[[Task], str], inproc: Any = None
) -> Group:
    evaluator.memo.size = 0  # time every check (the verdict memo would answer the later rounds)
    return Group(
        model,
        family,
        [(t, t.reference) for t in tasks],
        lambda t, s: evaluator.check(AgentState(t), Action(s)),
        lambda t, s: raw(t),
        pids=lambda: (evaluator._checks._get_worker().pid,),
        close=evaluator.close,
        compare_verdict=True,
        inproc=(lambda t, s: inproc.check_here(t, s)) if inproc is not None else None,
    )


def sat_groups(limit: int | None, families: Iterable[str] = SAT_FAMILIES) -> list[Group]:
    """Each SATLIB family's solver tasks (their reference configuration), checked and solved raw."""
    from bench_sat_smt import direct_sat

    from cm_gym.domains.sat.evaluator import SatEvaluator
    from cm_gym.domains.sat.loader import load_satlib_tasks

    out = []
    for fam in families:
        if not (data_root() / "sat" / fam).is_dir():
            continue
        tasks = load_satlib_tasks(families=[fam], limit=limit)
        inproc = SatEvaluator(isolated=False) if IN_PROCESS else None
        out.append(_isolated_group("SAT", fam, tasks, SatEvaluator(), direct_sat, inproc))
    return out


def smt_groups(limit: int | None, logics: Iterable[str] = SMT_LOGICS) -> list[Group]:
    """Each SMT-LIB logic folder's solver tasks (`limit` files per sat/unsat folder)."""
    from bench_sat_smt import direct_smt

    from cm_gym.domains.base import LoadReport
    from cm_gym.domains.smt.evaluator import SmtEvaluator
    from cm_gym.domains.smt.loader import load_smtlib_tasks

    out = []
    for logic in logics:
        if not (data_root() / "smt" / logic).is_dir():
            continue
        tasks = load_smtlib_tasks(logics=[logic], limit=limit, report=LoadReport())
        if tasks:
            inproc = SmtEvaluator(isolated=False) if IN_PROCESS else None
            out.append(_isolated_group("SMT", logic, tasks, SmtEvaluator(), direct_smt, inproc))
    return out


# -- report ------------------------------------------------------------------------------------
def print_header() -> None:
    print(
        f"  {'':<4}{'family':<26}{'inputs':>6}{'raw cpu':>10}{'ours cpu':>10}{'ratio':>9}"
        f"{'raw wall':>10}{'ours wall':>10}{'ratio':>9}{'raw dis.':>9}   (ms per input)"
    )


def print_row(row: Row) -> None:
    n = max(1, row.n)
    cpu_ratio = row.ratio(row.ours_cpu, row.raw_cpu)
    wall_ratio = row.ratio(row.ours_wall, row.raw_wall)
    raw_cpu, ours_cpu = statistics.median(row.raw_cpu) / n, statistics.median(row.ours_cpu) / n
    raw_wall, ours_wall = statistics.median(row.raw_wall) / n, statistics.median(row.ours_wall) / n
    flag = "" if cpu_ratio <= TARGET else "  > target"
    if row.inproc_cpu:
        flag += f"  (in-process {row.ratio(row.inproc_cpu, row.raw_cpu):.2f}x)"
    print(
        f"  {row.model:<4}{row.family:<26}{row.n:>6}{1e3 * raw_cpu:>10.3f}{1e3 * ours_cpu:>10.3f}"
        f"{cpu_ratio:>8.2f}x{1e3 * raw_wall:>10.3f}{1e3 * ours_wall:>10.3f}{wall_ratio:>8.2f}x"
        f"{row.raw_disagree:>9}{flag}",
        flush=True,
    )


def print_kinds(row: Row) -> None:
    """A family's CPU split by kind of input (`kind_split`): ratio of the sums over its rounds."""
    for kind, n, ours, raw in kind_split(row):
        ratio = ours / raw if raw > 0 else float("nan")
        rounds = max(1, len(row.raw_cpu))
        print(f"      {kind + ':':<30}{n:>6}{1e3 * raw / n / rounds:>10.3f}{1e3 * ours / n / rounds:>10.3f}"
              f"{ratio:>8.2f}x")  # fmt: skip


def print_worst(row: Row, k: int) -> None:
    """The `k` inputs whose check cost the most CPU beyond the raw tool's (where a family's ratio
    comes from)."""
    worst = sorted(row.per_input, key=lambda x: x[2] - x[1])[:k]
    for name, ours, raw in worst:
        if ours > raw:
            print(f"      {name}: +{1e3 * (ours - raw) / max(1, len(row.raw_cpu)):.3f} ms CPU per check "
                  f"({ours / raw if raw else float('inf'):.2f}x)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few inputs per family, 2 rounds")
    ap.add_argument("--only", nargs="+", choices=("sql", "sat", "smt"), default=["sql", "sat", "smt"])
    ap.add_argument("--rounds", type=int, default=None, help="timed passes (default 3; --quick 2)")
    ap.add_argument("--sql-limit", type=int, default=None, help="Spider questions (default all)")
    ap.add_argument("--sat-limit", type=int, default=None, help="files per SAT family (default 200)")
    ap.add_argument("--smt-limit", type=int, default=None, help="files per SMT sat/unsat folder (default 10)")
    ap.add_argument("--sat-families", nargs="+", default=list(SAT_FAMILIES))
    ap.add_argument("--smt-logics", nargs="+", default=list(SMT_LOGICS))
    ap.add_argument("--worst", type=int, default=0, help="list the N inputs with the most extra CPU")
    ap.add_argument("--verdicts-out", type=Path, default=None, help="write every verdict here (JSON)")
    ap.add_argument(
        "--verdicts-against", type=Path, default=None, help="count verdicts differing from this file"
    )
    ap.add_argument("--split-kinds", action="store_true",
                    help="also time each kind of SQL prediction in a pass of its own")  # fmt: skip
    ap.add_argument("--in-process", action="store_true",
                    help="also time each SAT/SMT check without its worker: the sandbox's share")  # fmt: skip
    args = ap.parse_args(argv)
    global IN_PROCESS
    IN_PROCESS = args.in_process
    rounds = args.rounds or (2 if args.quick else 3)
    sql_limit = args.sql_limit or (120 if args.quick else None)
    sat_limit = args.sat_limit or (20 if args.quick else 200)
    smt_limit = args.smt_limit or (3 if args.quick else 10)
    print(f"World models vs their raw tools, {rounds} interleaved rounds (data: {data_root()})")
    print_header()
    rows: list[Row] = []
    builders: list[tuple[str, Callable[[], list[Group]]]] = [
        ("sql", lambda: sql_groups(sql_limit)),
        ("sat", lambda: sat_groups(sat_limit, args.sat_families)),
        ("smt", lambda: smt_groups(smt_limit, args.smt_logics)),
    ]
    for name, build in builders:
        if name not in args.only:
            continue
        model_rows = []
        for group in build():
            row = measure(group, rounds)
            print_row(row)
            if row.kinds:
                print_kinds(row)
            if args.worst:
                print_worst(row, args.worst)
            model_rows.append(row)
            if args.split_kinds and group.kinds:
                for kind in dict.fromkeys(group.kinds):  # each kind in a pass of its own (not in "all")
                    items = [it for it, k in zip(group.items, group.kinds, strict=True) if k == kind]
                    alone = replace(group, family=f"{kind}, alone", items=items, kinds=None)
                    print_row(measure(alone, rounds))
        if len(model_rows) > 1:
            total = Row(model_rows[0].model, "all", sum(r.n for r in model_rows))
            attrs = ["raw_cpu", "ours_cpu", "raw_wall", "ours_wall"]
            attrs += ["inproc_cpu"] if all(r.inproc_cpu for r in model_rows) else []
            for attr in attrs:
                setattr(
                    total, attr, [sum(v) for v in zip(*(getattr(r, attr) for r in model_rows), strict=True)]
                )
            total.raw_disagree = sum(r.raw_disagree for r in model_rows)
            print_row(total)
        rows.extend(model_rows)
    verdicts = {k: v for row in rows for k, v in row.verdicts.items()}
    print(f"verdicts recorded: {len(verdicts)}; raw tool disagreements: {sum(r.raw_disagree for r in rows)}")
    if args.verdicts_out:
        args.verdicts_out.write_text(json.dumps(verdicts, indent=0, sort_keys=True))
    if args.verdicts_against:
        old = json.loads(args.verdicts_against.read_text())
        shared = [k for k in verdicts if k in old]
        differ = [k for k in shared if verdicts[k] != old[k]]
        print(f"verdicts against {args.verdicts_against}: {len(shared)} compared, {len(differ)} differ")
        for k in differ[:20]:
            print(f"    {k}: {old[k]} -> {verdicts[k]}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
