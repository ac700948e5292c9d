"""`cm-gym check-domain`: run `cm_gym.check_domain` on a registered benchmark's domain and tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from cm_gym.cli._args import nonneg_int, pos_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check-domain",
        help="check a benchmark's domain against the Domain contract (like Gymnasium's check_env)",
        description="Loads the benchmark's tasks and checks its domain: references solved, malformed "
        "actions scored, error operators firing, conditions parsing and falsifiable, the hidden "
        "reference never read by memory hooks. Exit status 1 when a check fails.",
    )
    p.add_argument("benchmark", help="registered benchmark name or Gymnasium id (see `cm-gym benchmarks`)")
    p.add_argument(
        "--max-tasks", type=pos_int, default=40, help="tasks whose reference is checked (default 40)"
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of the task sample (default 0)")
    p.add_argument(
        "--data", type=Path, default=None, help="data folder in the benchmark's layout (default: its own)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.domain_check import check_domain
    from cm_gym.registry import get_benchmark

    tasks = get_benchmark(args.benchmark).load(args.data) if args.data is not None else None
    report = check_domain(
        args.benchmark, tasks, max_tasks=args.max_tasks, seed=args.seed, raise_on_failure=False
    )
    print(report.format())
    return 0 if report.ok else 1
