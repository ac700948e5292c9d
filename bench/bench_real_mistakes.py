"""Memory from real mistakes: per benchmark and recorded system, how many real first drafts fail,
how many of those failures Module I's K = 4 local search repairs, how many verified records form
(and with which conditions), and whether the stored corrections fix *held-out* real failures —
of the same system and of another one (`cm_gym.studies.analysis.real_memory`).

Splits are the benchmarks' own (seed 12345): records come from the build side (Spider: by
database; Dafny: by project; HumanEval: by problem), held-out failures from the eval side.
Coverage / fix rate are given for the top-k retrieved records (k = 3, what a selector chooses
from) and for every eligible record (condition holds); "any" ignores conditions. A third table
applies each store to the *build side's own* real failures, every task offered only the other
tasks' records: the optimistic reading, environments (databases, projects) seen.

    python bench/bench_real_mistakes.py                       # Spider (7 systems) + HumanEval (2)
    python bench/bench_real_mistakes.py --benchmarks Dafny --systems gpt-4o claude-3-opus \\
        --n-build 60 --n-eval 60                             # Dafny verifies for seconds per program

The last column is the distance of the system's fitted simulator profile (`simulated:<system>`) to
the real error distribution before and after the fit: the total variation between kind
distributions, as recorded in the profile file by `bench/bench_error_profiles.py --fit`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.recordings import load_recordings
from cm_gym.studies.analysis.real_memory import construct_from_recorded, heldout_transfer, split_ids

SYSTEMS = {
    "SpiderSQL": ("gpt-4-zero-shot", "gpt-4-few-shot", "gpt-4-din-sql", "gpt-4-dail-sql",
                  "gpt-4-dail-sql-sc", "codex-few-shot", "codex-din-sql"),
    "Dafny": ("gpt-4o", "gpt-4-turbo", "gpt-3.5-turbo", "claude-3-opus", "codellama-7b"),
    "CodeHumanEvalSynth": ("gpt-4", "gpt-4-reflexion"),
}  # fmt: skip
#: (store of, failures of): another system's corrections applied to a system's mistakes
CROSS = {
    "SpiderSQL": (("gpt-4-zero-shot", "codex-few-shot"), ("codex-few-shot", "gpt-4-zero-shot")),
    "Dafny": (("gpt-4o", "claude-3-opus"), ("claude-3-opus", "gpt-4o")),
    "CodeHumanEvalSynth": (("gpt-4", "gpt-4-reflexion"), ("gpt-4-reflexion", "gpt-4")),
}
KIND = {"SpiderSQL": "spider", "Dafny": "dafny", "CodeHumanEvalSynth": "humaneval"}


def _profile_distance(benchmark: str, system: str) -> str:
    """ "TV before → after" of the system's fitted profile (its file's own record), or "—"."""
    from cm_gym.llm.profiles import load_profile

    try:
        profile = load_profile(system)
    except Exception:  # noqa: BLE001 - a column of a report, never the run
        return "—"
    before = (profile.meta.get("before") or {}).get("tv") if profile else None
    after = (profile.meta.get("after") or {}).get("tv") if profile else None
    return f"TV {before:.3f} → {after:.3f}" if before is not None and after is not None else "—"


def _agreement(benchmark: str, system: str, result: Any, tasks: dict[str, Any]) -> str:
    """How often our world model's verdict on the first draft agrees with the data folder's."""
    rows = load_recordings(KIND[benchmark])
    solved = set(result.solved_ids)
    agree = total = 0
    for tid in solved | {f["task_id"] for f in result.failures}:
        task = tasks[tid]
        out = rows.get(get_domain(task.domain).recording_key(task), system)
        if out is None:
            continue
        theirs = {"spider": out.verdict == "correct", "humaneval": out.verdict == "pass"}.get(
            KIND[benchmark], out.verdict.isdigit() and out.verdict != "0"
        )
        agree += theirs == (tid in solved)
        total += 1
    return f"{agree}/{total}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--benchmarks", nargs="+", default=["SpiderSQL", "CodeHumanEvalSynth"], choices=list(SYSTEMS)
    )
    p.add_argument(
        "--systems", nargs="+", help="only these systems (default: every system of each benchmark)"
    )
    p.add_argument("--n-build", type=int, default=None, help="first N build-side tasks (default all)")
    p.add_argument("--n-eval", type=int, default=None, help="first N eval-side tasks (default all)")
    p.add_argument("--no-cross", action="store_true", help="skip the cross-system transfer")
    p.add_argument(
        "--split-by",
        default="databases",
        help="databases (environments apart: the tables of docs/real-mistakes.md) | tasks (the paper's "
        "App. D.2 split, SpiderSQL's protocol default) | default (each benchmark's own)",
    )
    p.add_argument("--out", type=Path, default=Path("runs/real-mistakes"), help="stores and report.json here")
    args = p.parse_args()
    report: dict[str, Any] = {
        "construction": [],
        "transfer": [],
        "seen": [],
        "sizes": vars(args) | {"out": str(args.out)},
    }
    own_rows, cross_rows, seen_rows = [], [], []
    for bench in args.benchmarks:
        by = None if args.split_by == "default" else args.split_by
        build = split_ids(bench, "build", split=by)[: args.n_build]
        held = split_ids(bench, "eval", split=by)[: args.n_eval]
        tasks = {t.task_id: t for t in get_benchmark(bench).load()}
        systems = [s for s in SYSTEMS[bench] if not args.systems or s in args.systems]
        snapshots: dict[str, str] = {}
        for system in systems:
            t0 = time.perf_counter()
            print(
                f"[{bench} {system}] construction on {len(build)} build tasks ...",
                file=sys.stderr,
                flush=True,
            )
            c = construct_from_recorded(bench, system, args.out / bench / system, build)
            snapshots[system] = c.snapshot
            print(
                f"[{bench} {system}] held-out transfer on {len(held)} eval tasks ...",
                file=sys.stderr,
                flush=True,
            )
            tr = heldout_transfer(bench, c.snapshot, system, held, store_system=system)
            seconds = time.perf_counter() - t0
            d, r = c.as_dict(), tr.as_dict()["rates"]
            report["construction"].append({**d, "verdict_agreement": _agreement(bench, system, c, tasks),
                                           "seconds": round(seconds, 1)})  # fmt: skip
            report["transfer"].append({"store": system, **tr.as_dict()})
            own_rows.append([
                bench, system, str(c.tasks), str(len(c.failures)), f"{c.repaired} ({_pct(c.repaired / max(1, len(c.failures)))})",
                str(c.improved), str(len(c.records)), str(c.conditioned), str(r["retrieved"]["failures"]),
                _pct(r["retrieved"]["coverage"]), _pct(r["retrieved"]["fix_rate"]), _pct(r["eligible"]["fixed_share"]),
                _pct(r["any"]["fixed_share"]), report["construction"][-1]["verdict_agreement"],
                _profile_distance(bench, system),
            ])  # fmt: skip
            print(f"[{bench} {system}] done in {seconds:.0f} s", file=sys.stderr, flush=True)
        for system in systems:  # seen environments: the other build tasks' records, own ones excluded
            tr = heldout_transfer(bench, snapshots[system], system, build, store_system=system, seen=True)
            report["seen"].append({"store": system, **tr.as_dict()})
            r = tr.as_dict()["rates"]
            seen_rows.append([
                bench, system, str(tr.store_records), str(r["retrieved"]["failures"]), _pct(r["retrieved"]["coverage"]),
                _pct(r["retrieved"]["fix_rate"]), _pct(r["eligible"]["fixed_share"]), _pct(r["any"]["fixed_share"]),
            ])  # fmt: skip
        for store_sys, fail_sys in () if args.no_cross else CROSS[bench]:
            if store_sys not in snapshots or fail_sys not in SYSTEMS[bench]:
                continue
            tr = heldout_transfer(bench, snapshots[store_sys], fail_sys, held, store_system=store_sys)
            report["transfer"].append({"store": store_sys, **tr.as_dict()})
            r = tr.as_dict()["rates"]
            cross_rows.append([
                bench, store_sys, fail_sys, str(tr.store_records), str(r["retrieved"]["failures"]),
                _pct(r["retrieved"]["coverage"]), _pct(r["retrieved"]["fix_rate"]), _pct(r["eligible"]["fixed_share"]),
                _pct(r["any"]["fixed_share"]),
            ])  # fmt: skip
    own_head = ["benchmark", "system", "drafts", "real failures", "repaired (K=4)", "improved", "records",
                "conditioned", "held-out failures", "coverage (top-k)", "fix rate (top-k)",
                "fixed (eligible)", "fixed (any record)", "verdicts agree", "profile dist"]  # fmt: skip
    cross_head = ["benchmark", "records of", "failures of", "records", "held-out failures",
                  "coverage (top-k)", "fix rate (top-k)", "fixed (eligible)", "fixed (any record)"]  # fmt: skip
    seen_head = ["benchmark", "system", "records", "build-side failures", "coverage (top-k)",
                 "fix rate (top-k)", "fixed (eligible)", "fixed (any record)"]  # fmt: skip
    for head, rows in ((own_head, own_rows), (cross_head, cross_rows), (seen_head, seen_rows)):
        if rows:
            print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
            print("\n".join("| " + " | ".join(row) + " |" for row in rows) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"report: {args.out / 'report.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
