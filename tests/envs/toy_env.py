"""The toy comparison domain registered as ``cm_gym_test/EnvToy-v0`` and a frozen store of
hand-made toy records (one that helps, look-alikes that harm) — test fixtures, not product."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gymnasium as gym

from cm_gym.domains.registry import RegistryError, get_benchmark, register_benchmark
from cm_gym.memory.record import Record
from cm_gym.memory.store import RecordStore
from tests.toy_domain import ToyDomain, toy_tasks

TOY_BENCHMARK = "EnvToy"
TEST_NAMESPACE = "cm_gym_test"

try:
    register_benchmark(TOY_BENCHMARK, domain=ToyDomain, load_tasks=toy_tasks, namespace=TEST_NAMESPACE)
except RegistryError:  # already registered in this process
    get_benchmark(TOY_BENCHMARK)

TOY_ENV_ID = f"{TEST_NAMESPACE}/{TOY_BENCHMARK}-v0"


def _record(
    source: str, a_minus: str, a_plus: str, condition: str, situation: str, order: int, **stats: float
) -> Record:
    rec = Record.create(
        domain="toycmp",
        source_task_id=source,
        env_id="env0",
        situation=situation,
        a_minus=a_minus,
        a_plus=a_plus,
        evidence={
            "score_minus": 0.0,
            "score_plus": 1.0,
            "feedback_minus": "wrong comparison",
            "feedback_plus": "correct",
        },
        condition=condition,
        contrast_key=f"{a_minus} -> {a_plus}",
        delta=1.0,
        admission_score=0.9,
        created_order=order,
    )
    return replace(rec, **stats) if stats else rec


def build_toy_store(path: Path, *, benchmark: str = TOY_BENCHMARK) -> Path:
    """A frozen toy store: an inclusive-boundary fix guarded by its condition, the same fix with no
    condition (a look-alike that breaks strict tasks) and the opposite advice with no condition."""
    live = path.with_suffix(".live.sqlite")
    store = RecordStore(live, domain="toycmp", benchmark=benchmark)
    store.add(
        _record(
            "toy-000",
            "x > 4",
            "x >= 4",
            "toy_inclusive()",
            "values at least k: the boundary value must be included",
            0,
            u=0.3,
            uses=4,
            helpful=3,
            neutral=1,
        )
    )
    store.add(_record("toy-002", "x > 2", "x >= 2", "", "values at least k boundary include", 1))
    store.add(_record("toy-001", "x >= 6", "x > 6", "", "values more than k: exclude the boundary", 2))
    store.freeze(path)
    store.close()
    return path


def make_toy(store: str, seed: int | None = None, **kw: object) -> gym.Env:
    """Module-level (picklable) factory of the toy selection env, for vector envs."""
    from cm_gym.envs.selection import MemorySelectionEnv

    kw.setdefault("tasks", "all")
    return MemorySelectionEnv(benchmark=TOY_BENCHMARK, store=store, **kw)
