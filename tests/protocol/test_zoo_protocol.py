"""The field's learned selectors inside the protocol and `cm-gym compare` (issue 34): trained on
T_train with the store frozen, evaluated with the same episodes, metrics and two-level CIs as
every policy; the comparison adds score CIs, verdicts and the figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cm_gym
from cm_gym.cli import make_parser
from cm_gym.cli.compare import config_from
from cm_gym.protocol import KNOWN_POLICIES, LEARNED_POLICIES, POLICIES, ProtocolConfig, ProtocolError
from cm_gym.protocol.compare import COMPARE_POLICIES, comparison, run_comparison, score_interval, verdict
from tests.envs.toy_env import TOY_BENCHMARK


def test_learned_names_match_the_agents_registry() -> None:
    from cm_gym.agents.zoo import LEARNED

    assert tuple(LEARNED) == LEARNED_POLICIES
    assert KNOWN_POLICIES == POLICIES + LEARNED_POLICIES
    assert ProtocolConfig().policies == POLICIES  # a plain run does not train them
    ProtocolConfig(policies=("none", "memrl")).validate()
    with pytest.raises(ProtocolError, match="unknown policy"):
        ProtocolConfig(policies=("none", "memrl2")).validate()


def test_learned_selectors_train_on_t_train_and_get_two_level_cis() -> None:
    from cm_gym.memory.defaults import default_snapshot

    results = cm_gym.evaluate_policies(
        {},
        benchmark=TOY_BENCHMARK,
        store=default_snapshot(TOY_BENCHMARK),
        baselines=("none", "top1", "random", "memrl", "linucb"),
        seeds=(0, 1),
        total_decisions=60,
    )
    policies = results["policies"]
    n_train = results["split"]["train"]
    for name in ("memrl", "linucb"):
        records = policies[name]["training"]
        assert [r["seed"] for r in records] == [0, 1]
        assert all(r["decisions"] >= 60 and r["episodes"] > 0 for r in records)
        assert len(policies[name]["per_seed"]) == 2
        assert policies[name]["masked_actions"] == 0
        two_level = policies[name]["paired_ci_two_level"]
        assert set(two_level) == {"vs_random", "vs_top1"}
        assert set(policies[name]["per_task_scores"]) == {0, 1}
    assert n_train > 0 and "training" not in policies["top1"]
    for record in policies["memrl"]["training"]:
        assert record["records_at_initial_q"] == record["store_records"] - record["records_updated"] >= 0
        assert len(record["q"]) == record["records_updated"]


def test_score_interval_and_verdicts() -> None:
    flat = score_interval({0: {"a": 50.0, "b": 50.0}, 1: {"a": 50.0, "b": 50.0}})
    assert flat == {"mean": 50.0, "lo": 50.0, "hi": 50.0, "seeds": 2, "tasks": 2}
    spread = score_interval({0: {f"t{i}": float(100 * (i % 2)) for i in range(40)}})
    assert spread["lo"] < 50.0 < spread["hi"] and spread["mean"] == 50.0
    assert score_interval({})["mean"] is None
    assert verdict({"diff": 3.0, "lo": 0.5, "hi": 6.0}) == "better"
    assert verdict({"diff": -3.0, "lo": -6.0, "hi": -0.5}) == "worse"
    assert verdict({"diff": 0.0, "lo": -1.0, "hi": 1.0}) == "no difference"
    assert verdict({"diff": 0.0, "lo": 0.0, "hi": 1.0}) == "no difference"  # 0 inside the CI
    assert verdict(None) is None


def test_comparison_reads_the_two_level_cis() -> None:
    results = {
        "policies": {
            "top1": {"label": "Top-1", "per_task_scores": {0: {"a": 100.0}}, "paired_ci_two_level": {}},
            "x": {
                "label": "X",
                "per_task_scores": {0: {"a": 0.0}},
                "paired_ci_two_level": {"vs_top1": {"diff": -100.0, "lo": -100.0, "hi": -100.0}},
            },
        }
    }
    rows = comparison(results)
    assert rows["x"]["vs_top1"]["verdict"] == "worse" and rows["x"]["vs_random"]["verdict"] is None
    assert rows["top1"]["score"]["mean"] == 100.0


def test_run_comparison_writes_results_and_the_figure(tmp_path: Path) -> None:
    cfg = ProtocolConfig(
        benchmark=TOY_BENCHMARK,
        out_dir=tmp_path,
        seeds=(0, 1),
        policies=("none", "top1", "random", "thompson", "memento-clf"),
        total_decisions=40,
        tensorboard=False,
        progress=False,
    )
    results = run_comparison(cfg)
    assert (tmp_path / "comparison.png").stat().st_size > 5000
    saved = json.loads((tmp_path / "results.json").read_text())
    assert set(saved["comparison"]) == {"none", "top1", "random", "thompson", "memento-clf"}
    for row in saved["comparison"].values():
        s = row["score"]
        assert s["lo"] <= s["mean"] <= s["hi"] and s["seeds"] == 2
    assert saved["comparison"]["thompson"]["vs_top1"]["verdict"] in ("better", "worse", "no difference")
    assert results["config"]["store"] is not None  # the default snapshot, frozen


def test_compare_command_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CM_GYM_QUICK", raising=False)
    args = make_parser().parse_args(["compare", "--benchmark", "SQL"])
    cfg = config_from(args)
    assert cfg.policies == COMPARE_POLICIES and set(LEARNED_POLICIES) <= set(cfg.policies)
    assert cfg.obs_layouts == ("paper",) and cfg.out_dir == Path("runs/compare-SQL")
    args = make_parser().parse_args(["compare", "--policies", "top1", "memrl", "--obs-layouts", "extended"])
    cfg = config_from(args)
    assert cfg.policies == ("top1", "memrl") and cfg.obs_layouts == ("extended",)
    assert np.isfinite(cfg.total_decisions)
