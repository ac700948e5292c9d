"""Re-verification cost against one construction pass (issue 23: `reverify` on a 200-record store
must take at most twice one construction pass over the store's source tasks).

    python bench/bench_reverify.py [--benchmark SpiderSQL] [--n-tasks 3200] [--records 200]
        [--families rename_column ...]

One run, one process, the simulated LLM (seed 0) and SQL's own evaluator: a SQL benchmark's
build split (seed 12345) built into a store of capacity ``--records`` (retention keeps it at that
size), then each change family applied to copies of the databases and the frozen store
re-verified on them (with the repair search). ``--benchmark SQL`` is the generated benchmark at
``--n-tasks`` tasks, ``SpiderSQL`` the real Spider subset (read from CM_GYM_DATA; copies of its
databases are changed, never the files themselves). With the paper's admission rule a store
saturates well below 200 records (admission refuses repeated contrasts: about 70 records from
1,080 generated source tasks, 29 from Spider's 176), so ``--tau-adm`` lowers the admission
threshold τ_adm (default here −10: every verified, non-conflicting contrast is admitted and
retention keeps the best ``--records``) to reach a 200-record store from real construction. Printed per family: records, verdicts, wall time,
evaluator calls and LLM tokens of re-verification, and each as a ratio to the construction pass
measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SOURCE_DATE_EPOCH", "1700000000")
os.environ.setdefault("CM_GYM_PROGRESS", "0")

from cm_gym.core.splits import make_split  # noqa: E402
from cm_gym.domains.registry import get_benchmark, get_domain  # noqa: E402
from cm_gym.domains.sql import load_generated_tasks  # noqa: E402
from cm_gym.llm.simulated import SimulatedLLM  # noqa: E402
from cm_gym.memory.construction import ConstructionConfig, build_memory  # noqa: E402
from cm_gym.memory.reverify import reverify_store  # noqa: E402
from cm_gym.memory.store import RecordStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", choices=("SQL", "SpiderSQL"), default="SQL", help="default SQL")
    ap.add_argument(
        "--n-tasks", type=int, default=3200, help="generated SQL tasks (--benchmark SQL; default 3200)"
    )
    ap.add_argument("--records", type=int, default=200, help="store capacity B (default 200)")
    ap.add_argument("--families", nargs="+", default=None, help="SQL change families (default: all)")
    ap.add_argument(
        "--tau-adm", type=float, default=-10.0, help="admission threshold (paper: 0.1; default -10)"
    )
    args = ap.parse_args()
    domain = get_domain("sql")
    spec = get_benchmark(args.benchmark)
    tasks = load_generated_tasks(seed=0, n_tasks=args.n_tasks) if args.benchmark == "SQL" else spec.load()
    split = make_split(tasks, seed=12345, by_env=spec.split_by_env)
    by_id = {t.task_id: t for t in tasks}
    build = [by_id[i] for i in split.build]
    print(
        f"cores {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; {spec.name}: {len(build)} source "
        f"tasks; capacity {args.records}, tau_adm {args.tau_adm}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg = ConstructionConfig(capacity=args.records, tau_adm=args.tau_adm)
        with RecordStore(
            root / "live.sqlite", domain="sql", benchmark=spec.name, capacity=args.records
        ) as store:
            started = time.perf_counter()
            summary = build_memory(domain, build, store, SimulatedLLM(seed=0), domain.make_evaluator(), cfg)
            t_build = time.perf_counter() - started
            snap = store.freeze(root / "snap.sqlite")
        calls_build = summary.solving_calls + summary.verification_calls
        tokens_build = summary.solving_tokens + summary.verification_tokens
        print(
            f"construction pass: {len(snap)} records from {summary.tasks} source tasks in {t_build:.1f} s, "
            f"{calls_build} evaluator calls, {tokens_build} tokens"
        )
        for family in args.families or list(domain.change_families()):
            changed, change = domain.apply_change(family, tasks, root / f"env-{family}", seed=0)
            started = time.perf_counter()
            rev = reverify_store(
                snap,
                root / f"rev-{family}.sqlite",
                changed,
                domain,
                domain.make_evaluator(),
                SimulatedLLM(seed=0),
            )
            t_rev = time.perf_counter() - started
            print(f"  (load average {os.getloadavg()[0]:.1f})")
            counts = ", ".join(f"{n} {s}" for s, n in rev.counts.items() if n)
            print(
                f"{family:20} {rev.records_in} records ({counts}): {t_rev:.1f} s, {rev.evaluator_calls} calls, "
                f"{rev.tokens} tokens; ratio to construction: time {t_rev / t_build:.3f}, "
                f"calls {rev.evaluator_calls / max(1, calls_build):.3f}, tokens {rev.tokens / max(1, tokens_build):.3f}"
            )


if __name__ == "__main__":
    main()
