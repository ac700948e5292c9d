"""Evaluate selectors and baselines on held-out tasks (store and policies frozen).

    python evaluate.py --benchmark SQL --training runs/SQL/training.json

Prints the results table (score, tokens, evaluator calls and failures per solved task, retrieval
coverage per opportunity, harmful use per selected record use) and writes ``results.json``.
"""

from __future__ import annotations

import argparse
import sys

from cm_gym.cli import evaluate as evaluate_cmd
from cm_gym.cli._args import add_dataclass_args
from cm_gym.protocol import ProtocolConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_dataclass_args(parser, ProtocolConfig)
    parser.add_argument("--training", default=None, help="training.json written by train.py")
    args = parser.parse_args(argv)
    if args.training is not None:
        from pathlib import Path

        args.training = Path(args.training)
    return evaluate_cmd.run(args)


if __name__ == "__main__":
    sys.exit(main())
