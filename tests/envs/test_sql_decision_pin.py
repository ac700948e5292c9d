"""Regression pin for the SQL decision path (issue 35 item 1: faster, behaviour identical).

The digests below were computed on main (09bb6a1) before the speed work: the default
SQL store that the first ``gym.make("cm_gym/SQL-v0")`` builds, and what the env returns over the
first decisions of a seeded random-valid-action rollout (the simulator's revised actions, the
records used, rewards, masks). A speed change that alters any of them changes what the README's
table measures, so it must fail here. Floats are rounded (6 places) so that the pin does not
depend on a CPU's last float32 bit; the observations are left out for the same reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

import cm_gym  # noqa: F401  (registers the env ids)

STORE_DIGEST = "50:c83399c3391157bc"
ROLLOUT_DIGEST = "09444f93fb30a3c1"
DECISIONS = 300


def _digest(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def sql_env() -> Iterator[gym.Env]:
    env = gym.make("cm_gym/SQL-v0")
    yield env
    env.close()


def test_default_sql_store_unchanged(sql_env: gym.Env) -> None:
    assert store_digest(sql_env) == STORE_DIGEST


def store_digest(sql_env: gym.Env) -> str:
    """The digest of the default store's records (ids, source, a⁻, a⁺, condition, key, q)."""
    records = sorted(
        (r.record_id, r.source_task_id, r.a_minus, r.a_plus, r.condition, r.contrast_key, r.situation)
        for r in sql_env.unwrapped.store.records
    )
    return f"{len(records)}:{_digest(records)}"


def test_sql_rollout_unchanged(sql_env: gym.Env) -> None:
    assert rollout_digest(sql_env) == ROLLOUT_DIGEST


def rollout_digest(sql_env: gym.Env) -> str:
    """The digest of a seeded random-valid-action rollout of `DECISIONS` decisions."""
    rng = np.random.default_rng(7)
    obs, info = sql_env.reset(seed=7)
    trace = [[info["task_id"], info["next_draft"], info["retrieved_ids"], info["action_mask"].tolist()]]
    for _ in range(DECISIONS):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, term, trunc, info = sql_env.step(action)
        trace.append(
            [
                action,
                round(float(reward), 6),
                term,
                info["action"],
                info["record_id"],
                info["changed_by_memory"],
                info["reuse_label"],
                round(info["score"], 6),
                info["action_mask"].tolist(),
                info["next_draft"],
                info["retrieved_ids"],
            ]
        )
        if term or trunc:
            obs, info = sql_env.reset()
            trace.append([info["task_id"], info["next_draft"], info["retrieved_ids"]])
    return _digest(trace)
