"""Training the field's learned selectors inside the protocol (issue 34): each one learns on
T_train with the store frozen, for the decision budget the masked DQN gets (`total_decisions`),
on an env of its own over the run's shared LLM, and is then evaluated frozen like every policy."""

from __future__ import annotations

import logging
from typing import Any

from cm_gym.protocol.config import ProtocolConfig
from cm_gym.protocol.stores import Prepared, make_env

logger = logging.getLogger(__name__)


def fit_learned(
    cfg: ProtocolConfig,
    snapshot: Any,
    prepared: Prepared,
    llm: Any,
    name: str,
    eval_env: Any,
    seed: int,
) -> tuple[Any, dict[str, Any]]:
    """A learned selector (`cm_gym.agents.zoo.LEARNED`) trained on T_train for this seed, bound
    to `eval_env` for evaluation, and its training record (decisions, seconds, what it learned)."""
    from cm_gym.agents.zoo import make_learned

    train_env = make_env(cfg, snapshot, prepared.split.train, llm, task_order="sequential")
    try:
        policy = make_learned(name, env=eval_env, seed=seed)
        record = policy.fit(train_env, prepared.split.train, total_decisions=cfg.total_decisions, seed=seed)
    finally:
        train_env.close()
    record["store_records"] = len(snapshot.records)
    if "records_updated" in record:  # MemRL's question: how many memories keep their initial Q
        record["records_at_initial_q"] = len(snapshot.records) - record["records_updated"]
    logger.info(
        "%s (seed %d) trained on %d tasks: %d decisions in %.1f s",
        name,
        seed,
        len(prepared.split.train),
        record["decisions"],
        record["seconds"],
    )
    if cfg.tensorboard:
        log_selector_stats(cfg, name, seed, record)
    return policy, record


#: the scalars a learned selector's training record gives TensorBoard (``selector/<key>``, one point
#: at the end of its training, x = its training decisions), when the policy has them
SELECTOR_SCALARS = (
    "train_solved_rate",  # every learned selector
    "records_updated",  # MemRL, MemQ: records whose Q moved
    "records_at_initial_q",  # MemRL, MemQ: records that kept Q_INIT (MemRL's question)
    "q_mean",
    "q_min",
    "q_max",
    "null_actions",  # MemRL, MemQ: training decisions with records where phase A kept none
    "credit_propagated",  # MemQ: ancestor updates through provenance links
    "pairs",  # Memento's classifier: (task, record) training pairs
    "positive_rate",
    "train_accuracy",
)


def log_selector_stats(cfg: ProtocolConfig, name: str, seed: int, record: dict[str, Any]) -> None:
    """What a learned selector learned, in TensorBoard: `SELECTOR_SCALARS` as ``selector/<key>``
    and, where it learns one value per record (MemRL, MemQ), their histogram ``selector/q``, in
    ``<out_dir>/tensorboard/<policy>/seed<N>`` beside the masked DQN's layouts (docs/tensorboard.md)."""
    import shutil
    from pathlib import Path

    from torch.utils.tensorboard import SummaryWriter

    run = Path(cfg.out_dir) / "tensorboard" / name / f"seed{seed}"
    if run.is_dir():
        shutil.rmtree(run)  # a rerun of this seed replaces its log, never adds a second
    step = int(record.get("decisions", 0))
    with SummaryWriter(log_dir=str(run)) as writer:
        for key in SELECTOR_SCALARS:
            value = record.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                writer.add_scalar(f"selector/{key}", float(value), step)
        q = record.get("q")
        if isinstance(q, dict) and q:
            import numpy as np

            writer.add_histogram("selector/q", np.array(list(q.values()), dtype=float), step)
