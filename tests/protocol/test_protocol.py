"""The protocol's end-to-end run on a small SQL configuration, and its refusals."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cm_gym.core.types import CmGymError, Split, SplitOverlapError
from cm_gym.protocol import (
    POLICIES,
    Prepared,
    ProtocolConfig,
    ProtocolError,
    build_snapshot,
    evaluate_all,
    load_snapshot,
    prepare,
    run_protocol,
)

pytestmark = pytest.mark.slow


def _small(out: Path, **kw: Any) -> ProtocolConfig:
    base = dict(
        benchmark="SQL",
        out_dir=out,
        seeds=(0, 1),
        total_decisions=120,
        checkpoint_every=60,
        n_build=60,
        n_train=40,
        n_eval=30,
        tensorboard=True,
        progress=False,
    )
    base.update(kw)
    return ProtocolConfig(**base)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProtocolConfig, dict[str, Any]]:
    cfg = _small(tmp_path_factory.mktemp("protocol"))
    return cfg, run_protocol(cfg)


def test_run_writes_results_for_every_policy_with_separate_denominators(small_run: Any) -> None:
    cfg, results = small_run
    on_disk = json.loads((cfg.out_dir / "results.json").read_text())
    assert set(on_disk["policies"]) == set(POLICIES) | {"cf_memory_extended"}  # one selector per layout
    ci = on_disk["policies"]["cf_memory_extended"]["paired_ci"]
    assert set(ci) == {"vs_random", "vs_top1"} and ci["vs_random"]["n_tasks"] == 30
    assert ci["vs_random"]["lo"] <= ci["vs_random"]["diff"] <= ci["vs_random"]["hi"]
    assert results["split"]["eval"] == 30
    for res in on_disk["policies"].values():
        assert len(res["per_seed"]) == 2
        one = res["per_seed"][0]
        assert one["n_tasks"] == 30 and 0.0 <= one["score"] <= 100.0
        assert one["evaluator_calls_per_solved"]["per"] == "solved task"
        assert one["retrieval_coverage"]["per"] == "retrieval opportunity"
        assert one["harmful_use"]["per"] == "selected record use"
    none = on_disk["policies"]["none"]["per_seed"][0]
    assert none["selected_uses"] == 0  # always skip never shows a record
    assert sorted((t["layout"], t["seed"]) for t in results["training"]) == [
        ("extended", 0), ("extended", 1), ("paper", 0), ("paper", 1)
    ]  # fmt: skip
    for t in results["training"]:
        assert Path(t["best_checkpoint"]).is_file() and t["best_step"] in (60, 120)
        assert t["validation_tasks"] == 20 and t["selection"]["best_return_se"] > 0
    assert list((cfg.out_dir / "tensorboard").rglob("events.out.tfevents*"))


def test_evaluation_leaves_the_snapshot_unchanged_and_is_repeatable(small_run: Any) -> None:
    cfg, results = small_run
    snap = Path(results["snapshot"]["path"])
    before = snap.read_bytes()
    ckpts = {t["seed"]: t["best_checkpoint"] for t in results["training"] if t["layout"] == "paper"}
    cfg2 = dataclasses.replace(cfg, store=snap, out_dir=cfg.out_dir / "again", policies=("none", "cf_memory"))
    again = evaluate_all(cfg2, ckpts)
    assert snap.read_bytes() == before
    for name in ("none", "cf_memory"):
        assert again["policies"][name]["per_seed"] == results["policies"][name]["per_seed"]


def test_snapshot_built_on_eval_tasks_is_refused(tmp_path: Path) -> None:
    cfg = _small(tmp_path, n_build=5)
    prepared = prepare(cfg)
    leaky = Prepared(
        prepared.spec, prepared.tasks, dataclasses.replace(prepared.split, build=prepared.split.eval[:5])
    )
    snapshot = build_snapshot(cfg, leaky)
    with pytest.raises(SplitOverlapError, match="evaluation tasks"):
        load_snapshot(snapshot, prepared)


def test_unfrozen_store_and_missing_store_are_refused(small_run: Any, tmp_path: Path) -> None:
    from cm_gym.memory.store import RecordStore

    cfg, _ = small_run
    prepared = prepare(cfg)
    live = tmp_path / "store.sqlite"  # the run shares the default store: make a live one here
    RecordStore(live, domain="sql", benchmark="SQL").close()
    with pytest.raises(CmGymError, match="manifest"):
        load_snapshot(live, prepared)  # writable store, no manifest
    with pytest.raises(CmGymError):
        load_snapshot(tmp_path / "nope.sqlite", prepared)


def test_store_of_another_benchmark_is_refused(tmp_path: Path) -> None:
    from cm_gym.memory.store import RecordStore

    with RecordStore(tmp_path / "toy.sqlite", domain="toycmp", benchmark="ProtocolToy") as store:
        store.freeze(tmp_path / "toy-snap.sqlite")
    with pytest.raises(ProtocolError, match="toycmp"):
        load_snapshot(tmp_path / "toy-snap.sqlite", prepare(_small(tmp_path)))


def test_overlapping_split_is_refused() -> None:
    with pytest.raises(SplitOverlapError):
        Split(build=("a",), train=("b",), validation=("b",), eval=("a",)).check()


def test_checkpoint_with_another_observation_size_is_refused_before_work(
    small_run: Any, tmp_path: Path
) -> None:
    from cm_gym.agents.masked_dqn import MaskedDQN

    cfg, results = small_run

    class Tiny(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (10,), np.float32)
        action_space = gym.spaces.Discrete(5)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return np.zeros(10, np.float32), {}

        def step(self, action: Any) -> Any:
            return np.zeros(10, np.float32), 0.0, True, False, {}

    from stable_baselines3 import DQN

    from cm_gym.envs.features import ObservationLayoutError

    with pytest.raises(ObservationLayoutError):
        MaskedDQN("MlpPolicy", Tiny())

    DQN("MlpPolicy", Tiny()).save(tmp_path / "tiny.zip")
    cfg2 = dataclasses.replace(
        cfg, store=Path(results["snapshot"]["path"]), out_dir=tmp_path, policies=("cf_memory",)
    )
    with pytest.raises(CmGymError):
        evaluate_all(cfg2, {0: str(tmp_path / "tiny.zip"), 1: str(tmp_path / "tiny.zip")})
    extended = {t["seed"]: t["best_checkpoint"] for t in results["training"] if t["layout"] == "extended"}
    with pytest.raises(ObservationLayoutError, match="extended layout"):  # given as paper checkpoints
        evaluate_all(cfg2, extended)
    assert not (tmp_path / "results.json").exists()


def test_policy_labels_name_the_learner_that_trained_the_selector() -> None:
    from cm_gym.protocol import policy_label

    assert policy_label("cf_memory") == "CF Memory (masked DQN)"
    assert policy_label("cf_memory_extended", "rllib-ppo") == "CF Memory (masked RLlib PPO, extended z_t)"
    assert policy_label("cf_memory", "rllib-dqn") == "CF Memory (masked RLlib DQN)"
    assert policy_label("random", "rllib-ppo") == "Random valid"


def test_the_protocol_package_keeps_every_public_name_of_the_former_module() -> None:
    """`cm_gym.protocol` was one module: every public name it had stays importable from the package,
    and a re-exported name is the very object its submodule defines (not a copy)."""
    import cm_gym.protocol as protocol

    former = (
        "ALGOS", "CI_BASELINES", "POLICIES", "POLICY_LABELS", "Checkpoints", "Prepared", "ProtocolConfig",
        "ProtocolError", "build_snapshot", "check_snapshot", "checkpoints_by_layout", "config_json",
        "evaluate_all", "evaluate_policies", "llm_stats", "load_snapshot", "make_env", "make_policy",
        "make_protocol_llm", "policy_label", "prepare", "resolve_policy", "run_protocol", "selector_name",
        "train_all", "train_layouts", "train_selector", "with_overrides",
    )  # fmt: skip
    assert [n for n in former if not hasattr(protocol, n)] == []
    assert set(former) <= set(protocol.__all__)
    for name in ("ProtocolConfig", "run_protocol", "train_selector", "make_env", "evaluate_policies"):
        obj = getattr(protocol, name)
        assert getattr(importlib.import_module(obj.__module__), name) is obj
        assert obj.__module__.startswith("cm_gym.protocol.")
