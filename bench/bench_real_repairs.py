"""Real repairs, fairly admitted (issue 32 items 3–4): per recorded Spider system, its real
failures, how many one base-grammar edit, one new-kind edit or another published system's output
repairs on the task's database, how many failures keep a repair admitted on several database
instances (the task's database and `--instances` generated variants), and the accidental repairs
refused (`cm_gym.studies.analysis.real_repairs`). Then the same check on simulated drafts: the
records a default SQL-v0 build admits today, and how many the check on variants refuses.

    python bench/bench_real_repairs.py                     # 7 systems, 10 variants, SQL-v0 on 800 tasks
    python bench/bench_real_repairs.py --instances 3 --systems gpt-4-zero-shot --simulated 0

Variants are built once per database into $CM_GYM_CACHE/sql-instances (the first run pays it;
that time is printed apart). CPU ms per repair pair: a⁺ checked on the task's database (today)
against the confirmation on the variants (a⁺ and a⁻ on each; the gold's well-definedness once).
Run from the repository root with ``PYTHONPATH=.`` in a worktree whose cm_gym is not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cm_gym.core.types import AgentState, Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.store import RecordStore
from cm_gym.studies.analysis.real_repairs import spider_tasks, system_repairs

SYSTEMS = ("gpt-4-zero-shot", "gpt-4-few-shot", "gpt-4-din-sql", "gpt-4-dail-sql", "gpt-4-dail-sql-sc",
           "codex-few-shot", "codex-din-sql")  # fmt: skip


def _table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        + ["| " + " | ".join(r) + " |" for r in rows]
    )


def real(args: argparse.Namespace, report: dict[str, Any]) -> None:
    tasks = spider_tasks()
    evaluator = get_domain("sql").make_evaluator(instances=args.instances, instance_seed=args.seed)
    t0 = time.perf_counter()
    for path in sorted({t.meta["db_path"] for t in tasks}):
        evaluator.confirm_contrast(
            AgentState(next(t for t in tasks if t.meta["db_path"] == path)), "", "SELECT 1"
        )
    build_s = time.perf_counter() - t0
    rows, kinds = [], Counter()
    for system in args.systems:
        r = system_repairs(system, tasks, evaluator, k=args.k, systems=SYSTEMS)
        report["systems"].append(r.as_dict())
        kinds.update(f"{p.source}:{p.kind}" for p in r.pairs if not p.confirmed and p.source != "recorded")
        pairs = len(r.pairs)
        rows.append([
            system, str(r.drafts), f"{r.solved_one} / {r.solved_several}", str(r.failures), f"{r.repaired['base']} ({r.repaired_k['base']})",
            f"{r.repaired['new']} ({r.repaired_k['extended']})", str(r.repaired["recorded"]),
            str(r.admitted_one), str(r.admitted_several),
            f"{r.refused()} / {pairs} ({r.refused('base')} / {r.refused('new')} / {r.refused('recorded')})",
            f"{1000 * r.seconds_one / max(1, pairs):.2f} / {1000 * r.seconds_several / max(1, pairs):.2f}",
        ])  # fmt: skip
        print(f"[{system}] {r.failures} failures, {pairs} repair pairs", file=sys.stderr, flush=True)
    print(f"\n## Real drafts (Spider, {len(tasks)} tasks; {args.instances} variants per database, seed "
          f"{args.seed}; variants of {len({t.meta['db_path'] for t in tasks})} databases built or "
          f"loaded in {build_s:.1f} s)\n")  # fmt: skip
    print(_table(["system", "drafts", "right: one instance / several", "real failures", f"repaired: base edits (first {args.k})",
                  f"new edits (extended first {args.k})", "other systems' outputs", "admitted: one instance",
                  "several instances", "refused pairs / repair pairs (base / new / recorded)",
                  "CPU ms per pair: one instance / variants"], rows))  # fmt: skip
    print(
        "\nrefused edit repairs by kind (all systems): "
        + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
    )
    report["refused_kinds"] = dict(kinds)
    report["variant_build_s"] = round(build_s, 2)


def _build(tasks: list[Task], evaluator: Any, seed: int) -> tuple[Any, list[Any], float]:
    domain = get_domain("sql")
    with (
        tempfile.TemporaryDirectory() as tmp,
        RecordStore(Path(tmp) / "s.sqlite", domain=domain.name) as store,
    ):
        cpu = time.process_time()
        summary = build_memory(
            domain, tasks, store, SimulatedLLM(seed=seed), evaluator, ConstructionConfig(seed=seed)
        )
        return summary, list(store.records), time.process_time() - cpu


def simulated(args: argparse.Namespace, report: dict[str, Any]) -> None:
    domain = get_domain("sql")
    tasks = get_benchmark("SQL").load()[: args.simulated]
    by_id = {t.task_id: t for t in tasks}
    _build(tasks, domain.make_evaluator(), args.seed)  # warm-up (parse caches, databases): not timed
    one, records, one_s = _build(tasks, domain.make_evaluator(), args.seed)
    checker = domain.make_evaluator(instances=args.instances, instance_seed=args.seed)
    for path in sorted({t.meta["db_path"] for t in tasks}):  # variants built before the timed build
        checker.confirm_contrast(
            AgentState(next(t for t in tasks if t.meta["db_path"] == path)), "", "SELECT 1"
        )
    verdicts = [
        checker.confirm_contrast(AgentState(by_id[r.source_task_id]), r.a_minus, r.a_plus) for r in records
    ]
    refused = [r for r, v in zip(records, verdicts, strict=True) if v and not v["confirmed"]]
    several, records2, several_s = _build(tasks, checker, args.seed)
    sim = {
        "tasks": len(tasks), "records_one": len(records), "refused_of_those": len(refused),
        "refused_keys": dict(Counter(r.contrast_key for r in refused)), "records_several": len(records2),
        "rejected_several": dict(several.rejected), "build_cpu_s_one": round(one_s, 2),
        "build_cpu_s_several": round(several_s, 2),
    }  # fmt: skip
    report["simulated"] = sim
    print(f"\n## Simulated drafts (SQL-v0, first {len(tasks)} tasks, default construction)\n")
    print(_table(["records admitted today", "of those refused on variants", "records when admitting on several",
                  "refused_on_instances (build)", "build CPU s: one / several"],
                 [[str(len(records)), f"{len(refused)} ({', '.join(f'{k} {n}' for k, n in sim['refused_keys'].items()) or '—'})",
                   str(len(records2)), str(several.rejected.get("refused_on_instances", 0)),
                   f"{one_s:.1f} / {several_s:.1f}"]]))  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    p.add_argument("--instances", type=int, default=10, help="generated variants per database")
    p.add_argument("--seed", type=int, default=0, help="variant seed (and simulated LLM seed)")
    p.add_argument("--k", type=int, default=4, help="the first K edits (Module I's K)")
    p.add_argument("--simulated", type=int, default=800, help="SQL-v0 tasks to build on (0: skip)")
    p.add_argument("--out", type=Path, default=Path("runs/real-repairs/report.json"))
    args = p.parse_args()
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "systems": []}
    if args.systems:
        real(args, report)
    if args.simulated:
        simulated(args, report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nreport: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
