"""`cm-gym evaluate`: evaluate the policies on held-out tasks with store and selectors frozen."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cm_gym.cli._args import add_dataclass_args
from cm_gym.cli.run import config_from
from cm_gym.protocol import ProtocolConfig, ProtocolError, evaluate_all
from cm_gym.report import results_table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="evaluate policies on T_eval (frozen store and selectors)")
    add_dataclass_args(p, ProtocolConfig)
    p.add_argument("--training", type=Path, default=None, help="training.json written by `cm-gym train`")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    checkpoints: dict[int, str] = {}
    training = args.training or Path(cfg.out_dir) / "training.json"
    if training.is_file():
        record = json.loads(training.read_text())
        checkpoints = {int(t["seed"]): t["best_checkpoint"] for t in record["training"]}
        if cfg.store is None:
            cfg.store = Path(record["snapshot"])
    elif "cf_memory" in cfg.policies:
        raise ProtocolError(
            f"{training} not found: train first or pass --training / --policies without cf_memory"
        )
    results = evaluate_all(cfg, checkpoints)
    print(results_table(results))
    return 0
