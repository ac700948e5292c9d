"""Evaluate selectors and baselines on held-out tasks (store and policies frozen); the same as
``cm-gym evaluate``.

    python evaluate.py --training runs/SQL/training.json
    python evaluate.py --training runs/SQL/training.json --policy mine=my_pkg.policies:make_policy

Seeds, sizes and the snapshot come from training.json unless given here. Prints the results table
(score, tokens, evaluator calls and failures per solved task, retrieval coverage per opportunity,
harmful use per selected record use; ``--format markdown|json`` for other forms) and writes
``results.json`` and plots next to it.
"""

from __future__ import annotations

import argparse
import sys

from cm_gym.cli import evaluate as evaluate_cmd
from cm_gym.cli import guarded_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    args = evaluate_cmd.configure(parser).parse_args(argv)
    return guarded_run(evaluate_cmd.run, args)


if __name__ == "__main__":
    sys.exit(main())
