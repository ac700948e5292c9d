"""The Dafny budget against a hostile one-line annotation (issue 33), quiet and under a CPU hog.

Fermat's last theorem for cubes as a quantified assertion, inserted after the loop of task
dafny-0025 (``Clover_integer_square_root``): before issue 33 z3's ``nlsat`` ground on it for 12
minutes at the default rlimit (and over 7 at 1/25 of it), stopped only by the 1,200 s CPU
backstop. Each run checks the probe fresh (no verdict cache) with the Dafny evaluator's defaults
and prints one line: the verdict, what stopped it, the CPU seconds the verifier's processes used,
the CPU budget per process (from the reference's measured cost) and the wall time.
``--busy`` runs it again under a CPU hog (`CpuHog.tripling()`, or ``--hog N`` spinning processes)
and says whether the verdict is the same.

    python bench/bench_dafny_probe.py            # quiet (as the machine is)
    python bench/bench_dafny_probe.py --busy     # and under a CPU hog
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.dafny.evaluator import DafnyEvaluator
from cm_gym.domains.dafny.hostile import FERMAT_TASK_FILE, with_fermat
from cm_gym.domains.dafny.loader import load_dafny_tasks
from cm_gym.evaluators.cpuhog import CpuHog


def probe(task: Task, rlimit: int | None = None) -> tuple[Outcome, float]:
    with tempfile.TemporaryDirectory() as tmp:
        kwargs = {} if rlimit is None else {"rlimit": rlimit}
        ev = DafnyEvaluator(cache=Path(tmp) / "v.sqlite", **kwargs)
        t0 = time.perf_counter()
        out = ev.check(AgentState(task), Action(with_fermat(str(task.reference))))
        return out, time.perf_counter() - t0


def line(label: str, out: Outcome, wall: float) -> str:
    d = out.details
    return (f"{label}: status={out.status} score={out.score} stopped_by={d.get('stopped_by', '-')} "
            f"cpu={d.get('cpu_s')} s of {d.get('cpu_budget_s')} s per process ({d.get('cpu_budget_kind')}; "
            f"reference {d.get('reference_cpu_s')} s) rlimit={d.get('budget_limit'):,} wall={wall:.1f} s "
            f"(probe run {d.get('wall_s')} s)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("CM_GYM_DATA", "../shared/data"))
    ap.add_argument("--busy", action="store_true", help="run again under a CPU hog and compare")
    ap.add_argument("--hog", type=int, default=None,
                    help="spinning processes of the hog (default: CpuHog.tripling(), twice the load)")  # fmt: skip
    ap.add_argument("--rlimit", type=int, default=None, help="Boogie's /rlimit (default: the evaluator's)")
    args = ap.parse_args()
    task = next(t for t in load_dafny_tasks(Path(args.data) / "dafny") if t.meta["file"] == FERMAT_TASK_FILE)
    quiet, wall = probe(task, args.rlimit)
    print(
        line(f"{task.task_id} probe, as the machine is (load {os.getloadavg()[0]:.1f})", quiet, wall),
        flush=True,
    )
    if args.busy:
        with CpuHog(total=args.hog) if args.hog else CpuHog.tripling() as hog:
            busy, wall = probe(task, args.rlimit)
            print(line(f"{task.task_id} probe, under a hog of {hog.n}", busy, wall), flush=True)
        same = (busy.status, busy.score, busy.solved) == (quiet.status, quiet.score, quiet.solved)
        print(f"same verdict as the machine is and under the hog: {same}")


if __name__ == "__main__":
    main()
