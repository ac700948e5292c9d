"""Measure how many z3 resource units (Boogie's ``/rlimit``) each DafnyBench ground truth needs.

How the Dafny budget's default was chosen (``docs/budgets.md``): each ground truth is verified
once with ``/proverLog`` (every SMT-LIB command Boogie sends z3, one ``(reset)``-separated session
per Boogie implementation), each session is replayed through the same z3 with ``-st``, and the
file needs the largest session's ``rlimit-count`` (``/rlimit`` applies per session: `(reset)`
starts the count again). The replay counts a little more than Boogie's own run (the answer is
also read), so the figure is an upper bound. The measuring run itself has ``/rlimit:`` `--cap`
(default 100M: a file that needs more is "not verified" at the cap). Prints the distribution, the
files that need the most, and writes one JSON line per file to ``--out`` (resumed when it exists).

    python bench/bench_dafny_rlimit.py --out /tmp/dafny_rlimit.jsonl        # every ground truth
    python bench/bench_dafny_rlimit.py --limit 20 --out /tmp/sample.jsonl   # a sample
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

_RLIMIT_OPTION = re.compile(r"\(set-option :RLIMIT \d+\)\n", re.I)
_COUNT = re.compile(r":rlimit-count\s+(\d+)")


def sessions_needed(log: str, z3: str, cap: int) -> list[int]:
    """rlimit-count of each session of a Boogie prover log, replayed with the same cap."""
    text = _RLIMIT_OPTION.sub("", log)
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, session in enumerate(s for s in text.split("(reset)\n") if "(check-sat)" in s):
            path = Path(tmp) / f"s{i}.smt2"
            path.write_text(session)
            out = subprocess.run(
                [z3, "-st", f"rlimit={cap}", str(path)], capture_output=True, text=True, timeout=7200
            ).stdout
            m = _COUNT.search(out)
            counts.append(int(m.group(1)) if m else -1)
    return counts


def measure(path: Path, dafny: str, z3: str, cap: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "task.dfy"
        work.write_text(path.read_text(encoding="utf-8", errors="replace"))
        log = Path(tmp) / "log.smt2"
        t0, c0 = time.perf_counter(), os.times()
        run = subprocess.run(
            [
                dafny,
                "/compile:0",
                "/nologo",
                "/timeLimit:1200",
                f"/rlimit:{cap}",
                f"/proverLog:{log}",
                str(work),
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        c1 = os.times()
        wall = time.perf_counter() - t0
        out = run.stdout
        verified = (
            " 0 errors" in out
            and "time out" not in out
            and "out of resource" not in out
            and "parse errors" not in out
        )
        counts = sessions_needed(log.read_text(errors="replace"), z3, cap) if log.exists() else []
    return {
        "file": path.name,
        "verified": verified,
        "sessions": len(counts),
        "max_rlimit": max(counts, default=0),
        "wall_s": round(wall, 2),
        "cpu_s": round((c1.children_user + c1.children_system) - (c0.children_user + c0.children_system), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("CM_GYM_DATA", "../shared/data"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default="dafny_rlimit.jsonl")
    ap.add_argument("--dafny", default="dafny")
    ap.add_argument("--z3", default="z3")
    ap.add_argument(
        "--cap", type=int, default=100_000_000, help="/rlimit of the measuring run (default 100M)"
    )
    args = ap.parse_args()
    files = sorted((Path(args.data) / "dafny" / "ground_truth").glob("*.dfy"))
    if args.limit is not None:
        files = files[: args.limit]
    done = {}
    out = Path(args.out)
    if out.exists():  # resume
        for line in out.read_text().splitlines():
            row = json.loads(line)
            done[row["file"]] = row
    with out.open("a") as fh:
        for i, path in enumerate(files, 1):
            if path.name in done:
                continue
            row = measure(path, args.dafny, args.z3, args.cap)
            done[path.name] = row
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"[{i}/{len(files)}] {path.name}: {row['max_rlimit']:,} ({row['wall_s']} s)", flush=True)
    rows = [done[p.name] for p in files if p.name in done]
    needed = sorted(r["max_rlimit"] for r in rows if r["verified"])
    print(f"\n{len(rows)} ground truths, {len(needed)} verified")
    if needed:
        q = statistics.quantiles(needed, n=100)
        print(f"rlimit needed: median {statistics.median(needed):,.0f}, p90 {q[89]:,.0f}, p99 {q[98]:,.0f}, "
              f"max {needed[-1]:,}")  # fmt: skip
        for r in sorted(rows, key=lambda r: -int(r["max_rlimit"]))[:10]:
            print(f"  {r['file']}: {r['max_rlimit']:,} ({r['sessions']} sessions, {r['cpu_s']} s CPU)")


if __name__ == "__main__":
    main()
