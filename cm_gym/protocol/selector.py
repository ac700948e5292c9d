"""Training the selector: one masked DQN (or RLlib learner) per observation layout and seed on
T_train, its checkpoint chosen on the validation subset (paper C.3)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cm_gym.protocol.config import ProtocolConfig
from cm_gym.protocol.stores import Prepared, make_env


def tensorboard_run(out_dir: Path, layout: str, seed: int) -> tuple[str, str]:
    """Where a selector's TensorBoard logs go: one folder per observation layout, one run per seed
    (SB3 appends ``_1``), so TensorBoard lists ``paper/seed0_1``, ``extended/seed0_1``, ... and
    ``--logdir <out_dir>/tensorboard/<layout>`` opens one layout alone (docs/tensorboard.md)."""
    return str(out_dir / "tensorboard" / layout), f"seed{seed}"


def train_selector(
    cfg: ProtocolConfig, snapshot: Any, prepared: Prepared, seed: int, llm: Any = None, layout: str = "paper"
) -> dict[str, Any]:
    """Train the masked DQN on `layout` observations for `total_decisions` on T_train; keep the
    checkpoint with the best mean return on the validation subset of the training tasks (paper
    C.3). The subset is `validation_fraction` of T_train (default half: 120 SQL tasks), because
    with the paper-sized subsets of ~50 tasks the standard error of a checkpoint's mean return
    exceeds the differences between checkpoints; the record reports that SE and the paired SE of
    best − runner-up, so a reader can see whether the choice was noise."""
    import torch

    if cfg.algo != "masked-dqn":  # RLlib: same protocol, checkpoint selection and record
        from cm_gym.protocol.learners import learner

        return learner(cfg.algo).train(cfg, snapshot, prepared, seed, llm, layout)
    from cm_gym.agents.masked_dqn import MaskedDQN
    from cm_gym.protocol.training import CheckpointSelector, DecisionProgress

    torch.set_num_threads(1)  # a (64, 64) MLP is ~10x slower with several threads on a small box
    val = prepared.split.validation
    train_ids = list(prepared.split.train)
    env = make_env(cfg, snapshot, train_ids, llm, task_order="random", obs_layout=layout)
    val_env = make_env(cfg, snapshot, val, llm, obs_layout=layout)
    run_name = f"seed{seed}" if layout == "paper" else f"{layout}-seed{seed}"
    seed_dir = Path(cfg.out_dir) / "selector" / run_name
    tb: str | None = None
    tb_name = run_name
    if cfg.tensorboard:  # a rerun of this seed replaces its logs instead of adding seedN_2
        from cm_gym.protocol.outputs import remove_tensorboard_runs

        tb, tb_name = tensorboard_run(Path(cfg.out_dir), layout, seed)
        remove_tensorboard_runs(Path(tb), tb_name)
    model = MaskedDQN("MlpPolicy", env, seed=seed, tensorboard_log=tb, verbose=0)
    callback = CheckpointSelector(val_env, val, seed_dir, every=cfg.checkpoint_every)
    callbacks: list[Any] = [callback]
    if cfg.progress:  # a bar on a terminal; piped, a line per quarter of the seed's decisions
        callbacks.append(DecisionProgress(f"train {run_name}", steps=4))
    started = time.perf_counter()
    model.learn(
        total_timesteps=cfg.total_decisions, callback=callbacks, tb_log_name=tb_name, progress_bar=False
    )
    if callback.best_step < 0:  # shorter than one checkpoint interval: score the final policy
        callback.evaluate_checkpoint()
    model.logger.close()  # flush and close the TensorBoard writer
    env.close()
    val_env.close()
    return {
        "seed": seed,
        "layout": layout,
        "validation_tasks": len(val),
        "selection": callback.selection_noise(),
        "best_checkpoint": str(callback.best_path),
        "best_step": callback.best_step,
        "best_validation_return": callback.best_return,
        "history": callback.history,
        "train_seconds": time.perf_counter() - started,
    }


def train_layouts(
    cfg: ProtocolConfig,
    snapshot: Any,
    prepared: Prepared,
    llm: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One selector per (observation layout, seed), in that order."""
    jobs = [(layout, seed) for layout in cfg.obs_layouts for seed in cfg.seeds]
    out = []
    for i, (layout, seed) in enumerate(jobs):
        if progress:
            progress("train", i, len(jobs))
        out.append(train_selector(cfg, snapshot, prepared, seed, llm, layout))
        if progress:
            progress("train", i + 1, len(jobs))
    return out
