"""Issue 25: every shared folder's data check on the machine as it is and under a CPU hog.

For each folder: `cm_gym.cli.loadcheck.quiet_and_busy` (two fresh runs: own cache, loader caches
cleared, no verdict cache; the second under two spinning processes per core) and one line: tasks
loaded, references checked, solved in each run, whether tasks and verdicts are identical, the
wall times and their ratio (how much the hog slowed the run down), and the budget line (unit,
limit, most used by a solved reference: what each default was chosen from). Differences are
listed. QuixBugs also prints each reference's score under the hog.

    python bench/bench_load_independence.py                          # every folder, whole (hours)
    python bench/bench_load_independence.py --only SpiderSQL QuixBugs
    python bench/bench_load_independence.py --limit Dafny=40 --limit MiniF2F=20
    python bench/bench_load_independence.py --only smt/QF_BV --files 20   # 20 files per sat/unsat
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from cm_gym.cli.loadcheck import Comparison, quiet_and_busy
from cm_gym.evaluators.cpuhog import CpuHog

#: (label, benchmark, folder under the data root)
FOLDERS = (
    ("spider", "SpiderSQL", "spider"),
    ("sat", "SATLIB", "sat"),
    ("smt/QF_LIA", "SMTLIB", "smt/QF_LIA"),
    ("smt/QF_LRA", "SMTLIB", "smt/QF_LRA"),
    ("smt/QF_BV", "SMTLIB", "smt/QF_BV"),
    ("smt/AUFLIA", "SMTLIB", "smt/AUFLIA"),
    ("smt/LRA", "SMTLIB", "smt/LRA"),
    ("smt/BV", "SMTLIB", "smt/BV"),
    ("smt/QF_NRA", "SMTLIB", "smt/QF_NRA"),
    ("quixbugs", "QuixBugs", "quixbugs"),
    ("humaneval", "CodeHumanEval", "humaneval"),
    ("minif2f-rocq", "MiniF2F", "minif2f-rocq"),
    ("dafny", "Dafny", "dafny"),
)


def _line(label: str, run: Comparison) -> str:
    q, b = run.quiet, run.busy
    same = "same" if not run.differences else f"{len(run.differences)} DIFFERENCES"
    ratio = run.busy_s / run.quiet_s if run.quiet_s else float("nan")
    return (
        f"{label:<14} loaded {len(q.checked) + len(q.load.dropped):>5} checked {len(q.checked):>5} "
        f"solved {q.count('solved'):>5}/{b.count('solved'):<5} refused {len(q.load.refused):>3} "
        f"dropped {len(q.load.dropped):>4} hang-guard {q.count('hang guard')}/{b.count('hang guard')}  "
        f"{same:<16} {run.quiet_s:8.1f} s / {run.busy_s:8.1f} s (x{ratio:.2f})  {q.budget()}"
    )


def _sample(folder: Path, n: int, into: Path) -> Path:
    """The first `n` SMT-LIB files (by name) of each sub-folder of `folder`, copied under `into`:
    a documented smaller size for folders whose calibration at load takes hours here."""
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        (into / sub.name).mkdir(parents=True, exist_ok=True)
        for f in sorted(sub.glob("*.smt2"))[:n]:
            shutil.copy(f, into / sub.name / f.name)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("CM_GYM_DATA", "../shared/data"))
    ap.add_argument("--only", nargs="*", default=None, help="labels or benchmark names to run")
    ap.add_argument(
        "--limit", action="append", default=[], help="BENCHMARK=N: check only the first N references"
    )
    ap.add_argument("--hog", type=int, default=None,
                    help="spinning processes of the hog (default: twice the load average, at least 2 per core)")  # fmt: skip
    ap.add_argument("--json", default=None, help="write the per-folder results here")
    ap.add_argument(
        "--files", type=int, default=None, help="SMT-LIB folders: only the first N files per sub-folder"
    )
    args = ap.parse_args()
    limits = {k: int(v) for k, v in (item.split("=", 1) for item in args.limit)}
    root = Path(args.data)
    results = []
    size = args.hog or CpuHog.tripling().n  # sized once, from the load before any hog ran
    with tempfile.TemporaryDirectory(prefix="cm_gym_load_") as tmp:
        for label, benchmark, sub in FOLDERS:
            if args.only and label not in args.only and benchmark not in args.only:
                continue
            hog = CpuHog(total=size)
            print(f"{label}: hog of {hog.n} spinning processes", flush=True)
            data = root / sub
            if args.files and benchmark == "SMTLIB":
                data = _sample(data, args.files, Path(tmp) / "sample" / label.replace("/", "_"))
            run = quiet_and_busy(benchmark, data, limit=limits.get(benchmark),
                                 workdir=Path(tmp) / label.replace("/", "_"), hog=hog)  # fmt: skip
            print(_line(label, run), flush=True)
            for diff in run.differences[:20]:
                print(f"    {diff}")
            if benchmark == "QuixBugs":
                scores = {c.task_id: c.kind for c in run.busy.checked}
                print(f"    under the hog: {sum(k == 'solved' for k in scores.values())}/{len(scores)} "
                      f"reference fixes score 1.0; others: { {t: k for t, k in scores.items() if k != 'solved'} }")  # fmt: skip
            results.append({
                "folder": label, "benchmark": benchmark, "checked": len(run.quiet.checked),
                "solved_quiet": run.quiet.count("solved"), "solved_busy": run.busy.count("solved"),
                "refused": len(run.quiet.load.refused), "dropped": len(run.quiet.load.dropped),
                "differences": run.differences, "quiet_s": run.quiet_s, "busy_s": run.busy_s,
                "budget": run.quiet.budget(),
            })  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
