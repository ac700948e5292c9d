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
    return policy, record
