"""`cm-gym train`: build (or reuse) and freeze memory, then train the masked-DQN selector per seed."""

from __future__ import annotations

import argparse

from cm_gym.cli._args import add_dataclass_args
from cm_gym.cli.run import PhaseBar, config_from
from cm_gym.protocol import ProtocolConfig, train_all


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="build/freeze memory and train the selector (one per seed)")
    add_dataclass_args(p, ProtocolConfig, skip=("policies",))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    bar = PhaseBar(cfg.progress)
    record = train_all(cfg, progress=bar)
    bar.close()
    print(f"snapshot: {record['snapshot']}")
    for t in record["training"]:
        print(
            f"seed {t['seed']}: best checkpoint {t['best_checkpoint']} (step {t['best_step']}, "
            f"validation return {t['best_validation_return']:.3f}, {t['train_seconds']:.1f} s)"
        )
    return 0
