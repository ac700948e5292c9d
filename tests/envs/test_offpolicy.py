"""Off-policy estimators against the exact per-decision value the counterfactuals give (issue 34):
from decisions logged by a uniformly random policy, IPS and doubly robust estimates of Top-1,
None and Random must cover the true value with their 95% CIs, and tighten as the log grows."""

from __future__ import annotations

import numpy as np
import pytest

from cm_gym.agents.baselines import AlwaysSkip, TopOne
from cm_gym.envs.offpolicy import (
    Z95,
    doubly_robust,
    ips,
    log_uniform,
    policy_actions,
    target_probabilities,
    true_value,
    uniform_target,
)
from cm_gym.envs.selection import MemorySelectionEnv


@pytest.fixture(scope="module")
def logged() -> list:
    import os

    old = os.environ.get("CM_GYM_QUICK")
    os.environ["CM_GYM_QUICK"] = "1"  # the smoke-size default store: seconds to build
    try:
        from cm_gym.memory.defaults import default_snapshot

        store = default_snapshot("SQL")
    finally:
        if old is None:
            os.environ.pop("CM_GYM_QUICK")
        else:
            os.environ["CM_GYM_QUICK"] = old
    env = MemorySelectionEnv(
        benchmark="SQL", store=store, tasks="train", task_order="sequential", counterfactuals=True
    )
    tasks = [t.task_id for t in env.tasks]
    return log_uniform(env, tasks, n_decisions=800, seed=0)


def test_z95_is_the_normal_quantile() -> None:
    from statistics import NormalDist

    assert NormalDist().inv_cdf(0.975) == pytest.approx(Z95, abs=1e-6)


@pytest.mark.parametrize("target_name", ["top1", "none", "random"])
def test_ips_and_dr_cover_the_true_value(logged: list, target_name: str) -> None:
    if target_name == "random":
        target = uniform_target(logged)
    else:
        target = policy_actions({"top1": TopOne(), "none": AlwaysSkip()}[target_name], logged)
    truth = true_value(logged, target)
    for estimate in (ips(logged, target), doubly_robust(logged, target)):
        assert estimate.lo <= truth.value <= estimate.hi, (target_name, estimate, truth)
        assert estimate.n == len(logged) == 800


def test_the_estimates_tighten_as_the_log_grows(logged: list) -> None:
    target = policy_actions(TopOne(), logged)
    small, large = ips(logged[:200], target[:200]), ips(logged, target)
    assert large.se < small.se * 0.7  # about 1/√4 = 0.5 in expectation
    assert abs(large.value - true_value(logged, target).value) < 2 * Z95 * large.se


def test_top1_and_none_differ_in_truth_and_the_estimators_see_it(logged: list) -> None:
    top1, none = policy_actions(TopOne(), logged), policy_actions(AlwaysSkip(), logged)
    assert true_value(logged, top1).value != true_value(logged, none).value
    assert np.sign(ips(logged, top1).value - ips(logged, none).value) == np.sign(
        true_value(logged, top1).value - true_value(logged, none).value
    )


def test_targets_must_be_valid(logged: list) -> None:
    bad = np.full(len(logged), 4)  # slot 4 is never retrieved at k = 3
    with pytest.raises(ValueError, match="valid"):
        target_probabilities(logged, bad)
