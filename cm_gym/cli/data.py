"""`cm-gym data check`: load a dataset and run every task's reference through its world model.

Prints the budget (unit, limit, the most a reference used), one table (loaded, dropped, references
solved / over budget / stopped by the hang guard / unevaluable / failed, status disagreements,
seconds per check) and lists what was refused (each file, with the reason), failed or dropped.
Exit status 0 when the dataset passes, 1 when a file is refused, a reference fails or the
wall-clock hang guard stopped a check (`--strict`: also when one is over budget or unevaluable).
A user adding a dataset runs this first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="check a dataset: load it and evaluate every reference")
    inner = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    inner.required = True
    check = inner.add_parser(
        "check",
        help="load a benchmark's data and run every reference through the world model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("--benchmark", required=True, help="registered benchmark name, e.g. SMTLIB")
    check.add_argument(
        "--data", type=Path, default=None, help="data folder in the benchmark's layout (default: its own)"
    )
    check.add_argument("--limit", type=int, default=None, help="check only the first N loaded tasks")
    check.add_argument(
        "--strict", action="store_true", help="also fail on over-budget / unevaluable references"
    )
    check.add_argument("--shown", type=int, default=20, help="entries listed per section (default 20)")
    check.add_argument("--no-progress", action="store_true", help="no progress bar")
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.cli.datacheck import check_dataset
    from cm_gym.core.progress import progress_bar

    if args.limit is not None and args.limit < 0:
        raise argparse.ArgumentTypeError("--limit must be >= 0")
    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if args.no_progress:
            return
        if bar is None:
            bar = progress_bar(total, "references", "task", file=sys.stderr)
        bar.n = done
        bar.refresh()

    result = check_dataset(args.benchmark, args.data, limit=args.limit, progress=progress)
    if bar is not None:
        bar.close()
    print(result.table(shown=args.shown))
    passed = result.passed(strict=args.strict)
    print(
        f"\n{'PASSED' if passed else 'FAILED'}: {result.count('solved')} of {len(result.checked)} references solved"
    )
    return 0 if passed else 1
