"""Train the memory-use selector (CleanRL-style entry script).

    python train.py --benchmark SQL --seeds 0 1 2 3 4 --total-decisions 2000

Steps: load the benchmark and split it (T_build, T_train + validation, T_eval; overlap refused),
build verified counterfactual memory on T_build and freeze it, then train one masked DQN per seed
for `total_decisions` decisions, keeping the checkpoint with the best validation return.
TensorBoard logs go to ``<out_dir>/tensorboard`` (charts/, losses/, memory/, llm/).
"""

from __future__ import annotations

import argparse
import sys

from cm_gym.cli._args import add_dataclass_args
from cm_gym.cli.run import PhaseBar, config_from
from cm_gym.protocol import ProtocolConfig, train_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_dataclass_args(parser, ProtocolConfig, skip=("policies",))
    cfg: ProtocolConfig = config_from(parser.parse_args(argv))
    bar = PhaseBar(cfg.progress)
    record = train_all(cfg, progress=bar)
    bar.close()
    for t in record["training"]:
        print(
            f"seed {t['seed']}: {t['best_checkpoint']} (validation return {t['best_validation_return']:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
