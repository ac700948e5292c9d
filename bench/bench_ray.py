"""Ray backend figures: a 40-unit sweep on a local Ray cluster vs the serial runner, and whether
the two give identical results.

    python bench/bench_ray.py [--workers 2] [--seeds 10] [--ship auto|ship]

The sweep (SQL, ReAct, simulated LLM; medium sizes by default, ``--size quick`` for smoke sizes) is real units of every kind: one CounterMem store
and two retention variants, one masked-DQN selector per seed with its evaluation, two rule-based
CounterMem evaluations, and every baseline mechanism's build and evaluation — 40 units with the
default 10 seeds. Both runs start from empty results folders, with SOURCE_DATE_EPOCH pinned so
that stores are byte-comparable; the Ray wall time includes starting the local instance (printed
apart). Identity: every unit's `result_fingerprint` (result data less wall-clock times + artefact
bytes) must match between the two runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SOURCE_DATE_EPOCH", "1700000000")

from cm_gym.studies.experiments import QUICK, ExperimentConfig, Sizes  # noqa: E402
from cm_gym.studies.experiments.plan import Planner  # noqa: E402
from cm_gym.studies.experiments.runner import Runner, Unit, result_fingerprint  # noqa: E402

#: units of seconds to tens of seconds (a real sweep's are minutes): 48 build / train / eval tasks,
#: 500 decisions of selector training per seed
MEDIUM = Sizes(n_build=48, n_train=48, n_eval=48, total_decisions=500, checkpoint_every=125)
MECHANISMS_WITH_BUILD = ("expel", "generative_agents", "voyager", "memgpt", "reasoningbank")


def sweep(cfg: ExperimentConfig) -> list[Unit]:
    """The units of the sweep (their inputs are added by the runner)."""
    plan, bench, agent = Planner(cfg), "SQL", "react"
    store = plan.store(bench, agent)
    units = plan.cf_memory(bench, agent, store=store)  # a selector + an evaluation per seed
    units += [
        plan.countermem_eval(bench, agent, store, policy="top1"),
        plan.countermem_eval(bench, agent, store, policy="top1", retrieval="random"),
    ]
    for retention in ("similarity", "recent"):
        variant = plan.store(bench, agent, retention=retention, capacity=10, label=f"store {retention}")
        units.append(plan.countermem_eval(bench, agent, variant, policy="top1", label=f"eval {retention}"))
    units += [plan.mechanism_eval(bench, agent, m) for m in ("none", "best_of_n", "wm_without_cf")]
    units += [plan.mechanism_eval(bench, agent, m) for m in MECHANISMS_WITH_BUILD]
    return units


def count(units: list[Unit]) -> int:
    seen: set[str] = set()
    stack = list(units)
    while stack:
        u = stack.pop()
        if u.key not in seen:
            seen.add(u.key)
            stack.extend(u.deps.values())
    return len(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray instance (default 2)")
    ap.add_argument("--seeds", type=int, default=10, help="selector seeds (default 10: 40 units)")
    ap.add_argument("--ship", default="auto", help="auto (shared disk detected) or ship (copy every folder)")
    ap.add_argument(
        "--size",
        choices=("medium", "quick"),
        default="medium",
        help="unit sizes: medium (units of seconds to tens of seconds, default) or quick (smoke sizes)",
    )
    ap.add_argument("--keep", type=Path, help="copy both results folders here")
    args = ap.parse_args()
    from cm_gym.backends.ray.experiments import RayBackend

    with tempfile.TemporaryDirectory(prefix="cm_gym_bench_ray_") as tmp:
        sizes = QUICK if args.size == "quick" else MEDIUM
        cfg = ExperimentConfig.make(
            quick=True, seeds=tuple(range(args.seeds)), results_dir=Path(tmp), sizes=sizes
        )
        units = sweep(cfg)
        n = count(units)
        started = time.perf_counter()
        serial = Runner(Path(tmp) / "serial", progress=False).run(units)
        t_serial = time.perf_counter() - started

        started = time.perf_counter()
        backend = RayBackend(workers=args.workers, ship=args.ship)
        t_start = time.perf_counter() - started
        runner = Runner(Path(tmp) / "ray", backend, progress=False)
        try:
            on_ray = runner.run(units)
        finally:
            runner.close()
        t_ray = time.perf_counter() - started

        same = sum(
            result_fingerprint(a) == result_fingerprint(b) for a, b in zip(serial, on_ray, strict=True)
        )
        print(
            f"sweep: {n} units (SQL, react, {args.size} sizes, {args.seeds} selector seeds), {os.cpu_count()} CPUs"
        )
        print(f"serial runner:             {t_serial:7.1f} s")
        print(
            f"Ray, {args.workers} workers ({args.ship}):    {t_ray:7.1f} s "
            f"(of which starting Ray {t_start:.1f} s; without it {t_ray - t_start:.1f} s)"
        )
        print(
            f"ratio serial / Ray:        {t_serial / t_ray:7.2f}x "
            f"({t_serial / (t_ray - t_start):.2f}x without start-up)"
        )
        print(f"identical results:         {same}/{len(units)} requested units (fingerprints)")
        inputs = _deps(units, {u.key for u in units})
        a = Runner(Path(tmp) / "serial", progress=False).run(inputs)
        b = Runner(Path(tmp) / "ray", progress=False).run(inputs)
        differ = [
            u.describe()
            for u, x, y in zip(inputs, a, b, strict=True)
            if result_fingerprint(x) != result_fingerprint(y)
        ]
        print(
            f"identical input units:     {len(inputs) - len(differ)}/{len(inputs)} (stores, selectors, "
            f"built mechanisms){': differ ' + ', '.join(differ) if differ else ''}"
        )
        busy = {
            name: sum(float(r["_unit"]["seconds"]) for r in rs)
            for name, rs in (("serial", serial + a), ("ray", on_ray + b))
        }
        print(f"unit compute time (sum):   serial {busy['serial']:.1f} s, Ray workers {busy['ray']:.1f} s")
        if args.keep:
            import shutil

            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)


def _deps(units: list[Unit], exclude: set[str]) -> list[Unit]:
    out: dict[str, Unit] = {}
    stack = [d for u in units for d in u.deps.values()]
    while stack:
        u = stack.pop()
        if u.key not in out and u.key not in exclude:
            out[u.key] = u
            stack.extend(u.deps.values())
    return list(out.values())


if __name__ == "__main__":
    main()
