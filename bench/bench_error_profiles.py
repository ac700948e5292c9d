"""Real mistakes against the simulator's: per domain and real system, the real failures by kind,
the simulator's (default and fitted profile) by kind, the distance before and after fitting, the
one-edit-repairable share and the memory-free (None) score, real vs simulated.

    python bench/bench_error_profiles.py                 # the tables, from the shipped profiles
    python bench/bench_error_profiles.py --fit           # refit every profile, write cm_gym/llm/profiles/
    python bench/bench_error_profiles.py --only spider:gpt-4-zero-shot --holdout
    python bench/bench_error_profiles.py --json runs/error_profiles.json

Reads the published outputs under ``$CM_GYM_DATA/llm-outputs`` (never copied). The distance is
the total-variation distance between kind distributions (`cm_gym.studies.analysis.real_errors`); the
simulated samples are measured on seeds `--eval-seeds` (the fit uses `--fit-seeds`). Costs on
the 2-core development machine: SQL executes every answer and every grammar edit of every failure
(seconds per system); HumanEval judges in the sandbox (~0.3 s a program: the repair check runs on
`--repair-he` failures per sample); Dafny classifies without verifying, and verifies the repair
check's edits with Dafny 2.3 only for `--repair-dafny` failures of the systems in `--dafny-repair-systems`.
``--holdout`` (SQL) fits on half of the databases and measures on the other half.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

import numpy as np

from cm_gym.llm.profiles import load_profile, profile_names, write_profile
from cm_gym.llm.recordings import load_recordings
from cm_gym.studies.analysis.real_errors import ErrorSample
from cm_gym.studies.analysis.real_errors_compare import collectors
from cm_gym.studies.analysis.real_errors_fit import fit_profile
from cm_gym.studies.analysis.real_errors_report import kinds_table, summary_row, summary_table

SYSTEMS = {
    "spider": ("gpt-4-zero-shot", "gpt-4-few-shot", "gpt-4-din-sql", "codex-few-shot", "codex-din-sql",
               "gpt-4-dail-sql", "gpt-4-dail-sql-sc"),
    "dafny": ("gpt-4o", "gpt-4-turbo", "gpt-3.5-turbo", "claude-3-opus", "codellama-7b"),
    "humaneval": ("gpt-4", "gpt-4-reflexion"),
}  # fmt: skip


def _repair(kind: str, system: str, args: argparse.Namespace) -> bool | int:
    if kind == "spider":
        return True
    if kind == "humaneval":
        return args.repair_he
    return args.repair_dafny if system in args.dafny_repair_systems else False


def _holdout(tasks: list[Any], seed: int = 0) -> tuple[list[Any], list[Any]]:
    envs = sorted({t.env_id for t in tasks})
    pick = set(np.random.default_rng(seed).permutation(len(envs))[: len(envs) // 2].tolist())
    fit_envs = {e for i, e in enumerate(envs) if i in pick}
    return [t for t in tasks if t.env_id in fit_envs], [t for t in tasks if t.env_id not in fit_envs]


def run(kind: str, system: str, args: argparse.Namespace, defaults: dict[str, ErrorSample]) -> dict[str, Any]:
    col = collectors(kind)
    repair = _repair(kind, system, args)
    started = time.perf_counter()
    if args.fit or args.holdout:
        fit_tasks = eval_tasks = None
        if args.holdout:
            fit_tasks, eval_tasks = _holdout(col["tasks"](None))
        res = fit_profile(kind, system, rounds=args.rounds, fit_seeds=args.fit_seeds, eval_seeds=args.eval_seeds,
                          fit_tasks=fit_tasks, eval_tasks=eval_tasks, repair=repair,
                          difficulties=[None if d == "none" else float(d) for d in args.difficulties])  # fmt: skip
        real, default, fitted = res.real, res.default, res.fitted
        if args.fit and not args.holdout:
            meta = res.meta(kind, system, args.fit_seeds, args.eval_seeds)
            meta["generated_by"] = "python bench/bench_error_profiles.py " + " ".join(sys.argv[1:])
            path = write_profile(system, res.profile.domain, res.profile.builder, res.profile.params, meta)
            print(f"wrote {path}")
    else:
        tasks = col["tasks"](None)
        real = col["real"](
            system, tasks, repair=repair, **({"max_edits": args.dafny_edits} if kind == "dafny" else {})
        )
        extra = {"verify": args.dafny_proxy, "max_edits": args.dafny_edits} if kind == "dafny" else {}
        if kind not in defaults:
            defaults[kind] = col["simulated"](None, tasks, seeds=args.eval_seeds, repair=repair, **extra)
        default = defaults[kind]
        fitted = None
        if system in profile_names():
            fitted = col["simulated"](
                load_profile(system), tasks, seeds=args.eval_seeds, repair=repair, **extra
            )
        if kind == "dafny" and args.dafny_agree:
            from cm_gym.studies.analysis.real_errors_dafny import upstream_agreement

            real.notes["dafny_2_3_agreement"] = upstream_agreement(system, tasks, args.dafny_agree)
            print(f"Dafny 2.3 on upstream's verdicts ({system}): {real.notes['dafny_2_3_agreement']}")
    title = f"{kind} · {system}" + (" (held-out databases)" if args.holdout else "")
    print(f"\n## {title}  [{time.perf_counter() - started:.0f} s]\n")
    print(kinds_table([s for s in (real, default, fitted) if s is not None]))
    for s in (real, default, fitted):
        if s is not None and s.notes:
            print(f"  {s.source}: " + "; ".join(f"{k} {v}" for k, v in s.notes.items()))
    return {"row": summary_row(kind, system, real, default, fitted),
            "samples": {s.source: s.as_dict() for s in (real, default, fitted) if s is not None}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fit", action="store_true", help="refit the profiles and write them into the package")
    p.add_argument(
        "--holdout", action="store_true", help="fit on half the databases, measure on the rest (SQL)"
    )
    p.add_argument(
        "--only", nargs="+", metavar="KIND:SYSTEM", help="e.g. spider:gpt-4-zero-shot dafny:gpt-4o"
    )
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument(
        "--difficulties",
        nargs="+",
        default=["none", "0.6", "0.85"],
        help="task-difficulty settings the fit tries (none: slips independent of the task)",
    )
    p.add_argument("--fit-seeds", type=int, nargs="+", default=[0])
    p.add_argument("--eval-seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repair-he", type=int, default=40, help="HumanEval failures whose repair is checked")
    p.add_argument("--repair-dafny", type=int, default=30, help="Dafny failures whose repair is checked")
    p.add_argument("--dafny-repair-systems", nargs="*", default=["gpt-4o"])
    p.add_argument(
        "--dafny-edits", type=int, default=10, help="edits verified per Dafny failure in the repair check"
    )
    p.add_argument(
        "--dafny-agree",
        type=int,
        default=0,
        metavar="N",
        help="re-verify N upstream-solved and N upstream-failed programs per Dafny system with Dafny 2.3",
    )
    p.add_argument(
        "--dafny-proxy",
        type=int,
        default=0,
        metavar="N",
        help="verify N simulated Dafny failures (the 'differs from the ground truth' proxy) with Dafny 2.3",
    )
    p.add_argument("--json", help="write every sample and summary row to this file")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    pairs = [tuple(x.split(":", 1)) for x in args.only] if args.only else [
        (k, s) for k, systems in SYSTEMS.items() for s in systems]  # fmt: skip
    for kind, _ in pairs:
        load_recordings(kind)  # one clear error when the data is missing
    defaults: dict[str, ErrorSample] = {}
    out = [run(kind, system, args, defaults) for kind, system in pairs]
    print("\n## Summary (TV: total-variation distance between kind distributions; % of failures)\n")
    print(summary_table([o["row"] for o in out]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
