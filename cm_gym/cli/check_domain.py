"""`cm-gym check-domain`: run `cm_gym.check_domain` on a registered benchmark's domain and tasks.

``--strict`` also fails on an error operator that never fires on the benchmark's tasks and on a
default store (built on first use, as a bare ``gym.make`` builds it) holding fewer than
`MIN_DEFAULT_RECORDS` records: a memory of a handful of records cannot show what the benchmark's
memory does (raise the build split, ``default_n_build``, or the construction budget)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cm_gym.cli._args import nonneg_int, pos_int

#: the fewest records a benchmark's default store may hold under ``--strict``
MIN_DEFAULT_RECORDS = 10


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
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail on an error operator that never fires and on a default store with fewer than "
        f"{MIN_DEFAULT_RECORDS} records (builds the store if it is not cached)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.domains.check import check_domain
    from cm_gym.domains.registry import get_benchmark

    tasks = get_benchmark(args.benchmark).load(args.data) if args.data is not None else None
    report = check_domain(
        args.benchmark,
        tasks,
        max_tasks=args.max_tasks,
        seed=args.seed,
        raise_on_failure=False,
        strict=args.strict,
    )
    if args.strict:
        why = default_store_too_small(args.benchmark, args.data)
        (report.failures if why else report.passed).append(why or "default store: large enough")
    print(report.format())
    return 0 if report.ok else 1


def default_store_too_small(
    benchmark: str, data: Path | None = None, minimum: int = MIN_DEFAULT_RECORDS
) -> str:
    """Why the benchmark's default store is too small ("" when it holds at least `minimum`)."""
    from cm_gym.memory.defaults import default_snapshot
    from cm_gym.memory.snapshot import FrozenStore

    path = default_snapshot(benchmark, data=data)
    n = len(FrozenStore.open(path))
    if n < minimum:
        return (
            f"default store {path.name} holds {n} record(s), fewer than the minimum of {minimum}: "
            "raise the build split (default_n_build) or the construction budget"
        )
    return ""
