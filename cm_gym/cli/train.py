"""`cm-gym train`: build (or reuse) and freeze memory, then train the masked-DQN selector per seed."""

from __future__ import annotations

import argparse

from cm_gym.cli._args import add_dataclass_args, add_output_options
from cm_gym.cli.run import config_from, with_bars
from cm_gym.protocol import ProtocolConfig, train_all
from cm_gym.protocol.outputs import claim_out_dir

DESCRIPTION = (
    "Build verified memory on T_build and freeze it (or use --store), then train one masked-DQN "
    "selector per seed on T_train, keeping the checkpoint with the best validation return. Writes "
    "training.json (snapshot, checkpoints, validation history), checkpoints under selector/ and "
    "TensorBoard logs into --out-dir; `cm-gym evaluate` reads them."
)

#: The one line `cm-gym train` prints instead of per-seed results on a store that holds no record.
TRAINED_NOTHING = (
    "The store holds 0 records: no selector was trained (every action but skip is masked at every "
    "decision); `cm-gym evaluate` scores CF Memory as always-skip."
)


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `cm-gym train` and `python train.py`."""
    add_dataclass_args(p, ProtocolConfig, skip=("policies", "on_masked", "split_seeds"))
    add_output_options(p, table=False)
    return p


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="build/freeze memory and train the selector (one per seed)", description=DESCRIPTION
    )
    configure(p).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    claim_out_dir(cfg.out_dir, "train", overwrite=args.overwrite)
    record = with_bars(train_all, cfg)
    print(f"snapshot: {record['snapshot']}")
    if record.get("training_skipped_reason"):  # a 0-record store: nothing to select from
        print(TRAINED_NOTHING)
    for t in record["training"]:
        print(
            f"seed {t['seed']}: best checkpoint {t['best_checkpoint']} (step {t['best_step']}, "
            f"validation return {t['best_validation_return']:.3f}, {t['train_seconds']:.1f} s)"
        )
    return 0
