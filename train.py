"""Train the memory-use selector (CleanRL-style entry script; the same as ``cm-gym train``).

    python train.py --benchmark SQL --seeds 0 1 2 3 4 --total-decisions 2000

Steps: load the benchmark and split it (T_build, T_train + validation, T_eval; overlap refused),
build verified counterfactual memory on T_build and freeze it, then train one masked DQN per seed
for `total_decisions` decisions, keeping the checkpoint with the best validation return. An
existing ``training.json`` in --out-dir is refused unless --overwrite.

TensorBoard logs go to ``<out_dir>/tensorboard/<layout>/seed<N>_1`` (a rerun of a seed replaces
its run); open them with ``tensorboard --logdir runs/SQL/tensorboard``. Every key and what it
means: docs/tensorboard.md. In short:

- ``charts/``: episodic_return, solved, episode_decisions (training episodes, averaged between
  dumps), validation_return and validation_solved (one point per checkpoint, every one of them);
- ``memory/``: selected_uses, helpful_uses, harmful_uses, coverage; ``llm/``: tokens_per_task,
  evaluator_calls_per_task;
- SB3's own: ``train/loss``, ``train/learning_rate``, ``rollout/exploration_rate``,
  ``rollout/ep_rew_mean``, ``rollout/ep_len_mean``, ``time/fps``.
"""

from __future__ import annotations

import argparse
import sys

from cm_gym.cli import guarded_run
from cm_gym.cli import train as train_cmd

#: The TensorBoard scalar tags documented above (a test checks that a run writes every one).
TENSORBOARD_TAGS = (
    "charts/episodic_return",
    "charts/solved",
    "charts/episode_decisions",
    "charts/validation_return",
    "charts/validation_solved",
    "memory/selected_uses",
    "memory/helpful_uses",
    "memory/harmful_uses",
    "memory/coverage",
    "llm/tokens_per_task",
    "llm/evaluator_calls_per_task",
    "train/loss",
    "train/learning_rate",
    "rollout/exploration_rate",
    "rollout/ep_rew_mean",
    "rollout/ep_len_mean",
    "time/fps",
    # the field's learned selectors (cm-gym compare, --policies memrl ...): one point per seed
    "selector/train_solved_rate",
    "selector/records_updated",
    "selector/records_at_initial_q",
    "selector/q_mean",
    "selector/q_min",
    "selector/q_max",
    "selector/null_actions",
    "selector/credit_propagated",
    "selector/pairs",
    "selector/positive_rate",
    "selector/train_accuracy",
    "selector/q",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    args = train_cmd.configure(parser).parse_args(argv)
    return guarded_run(train_cmd.run, args)


if __name__ == "__main__":
    sys.exit(main())
