"""`cm-gym tabulate`: fill the LLM response cache with every call a protocol run can make, so that
training and evaluation replay a real model (``--llm-cache-mode ro``) at simulator speed.

It takes the options of `cm-gym run` (the same benchmark, split sizes, LLM, agent, k, budgets:
they decide which calls exist) plus ``--split`` and ``--dry-run`` (print the bill and stop)."""

from __future__ import annotations

import argparse

from cm_gym.cli._args import add_dataclass_args
from cm_gym.cli.run import config_from


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cm_gym.cli.tabulation import SPLITS
    from cm_gym.protocol import ProtocolConfig

    p = sub.add_parser(
        "tabulate",
        help="fill the LLM cache with every call a run can make (then train/evaluate with --llm-cache-mode ro)",
    )
    add_dataclass_args(
        p,
        ProtocolConfig,
        skip=("seeds", "total_decisions", "checkpoint_every", "policies", "tensorboard", "split_seeds"),
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help="env tasks to enumerate: train (with its validation subset), eval, or all (default)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the bound on calls and tokens, make no call")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.cli.tabulation import tabulate

    tabulate(config_from(args), args.split, dry_run=args.dry_run)
    return 0
