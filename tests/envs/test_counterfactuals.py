"""Opt-in per-decision counterfactuals (issue 34): ``info["counterfactual"]`` says, for skip and
every valid action, what ``step(action)`` would have returned; a brute-force re-run (a fresh env,
the same task, seed and earlier actions, then that action) must agree on 200 decisions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from cm_gym.envs.selection import MemorySelectionEnv
from tests.envs.toy_env import TOY_BENCHMARK, make_toy


def _brute_force_check(make: Callable[..., Any], n_decisions: int) -> tuple[int, int, int]:
    """(decisions checked, options checked, mismatches) along random-policy episodes."""
    env, ref = make(counterfactuals=True), make()
    tasks = [t.task_id for t in env.unwrapped.tasks]
    rng = np.random.default_rng(0)
    checked = options = mismatches = episode = 0
    while checked < n_decisions:
        task_id, seed = tasks[episode % len(tasks)], 1000 + episode
        episode += 1
        obs, info = env.reset(seed=seed, options={"task_id": task_id})
        prefix: list[int] = []
        done = False
        while not done and checked < n_decisions:
            valid = {int(a) for a in np.flatnonzero(info["action_mask"])}
            action = int(rng.choice(sorted(valid)))
            obs, reward, terminated, truncated, info = env.step(action)
            table = info["counterfactual"]
            assert set(table) == valid  # skip and every valid slot
            assert table[action]["reward"] == reward and table[action]["terminated"] == terminated
            assert info["counterfactual_regret"] == max(r["reward"] for r in table.values()) - reward >= 0
            for other, row in table.items():
                ref.reset(seed=seed, options={"task_id": task_id})
                for earlier in prefix:
                    ref.step(earlier)
                _, r, t, _, i = ref.step(other)
                same = (r, t, i["solved"], i["score"]) == (
                    row["reward"],
                    row["terminated"],
                    row["solved"],
                    row["score"],
                )
                mismatches += not same
                options += 1
            checked += 1
            prefix.append(action)
            done = terminated or truncated
    return checked, options, mismatches


def test_counterfactuals_match_a_brute_force_rerun_on_the_toy_domain() -> None:
    from cm_gym.memory.defaults import default_snapshot

    store = str(default_snapshot(TOY_BENCHMARK))
    checked, options, mismatches = _brute_force_check(
        lambda **kw: make_toy(store, task_order="sequential", **kw), 200
    )
    assert checked == 200 and options > checked and mismatches == 0


def test_counterfactuals_match_a_brute_force_rerun_on_sql(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_QUICK", "1")  # the smoke-size default store: seconds to build
    from cm_gym.memory.defaults import default_snapshot

    store = default_snapshot("SQL")
    make = lambda **kw: MemorySelectionEnv(  # noqa: E731
        benchmark="SQL", store=store, tasks="train", task_order="sequential", **kw
    )
    checked, options, mismatches = _brute_force_check(make, 200)
    assert checked == 200 and options > checked and mismatches == 0


def test_counterfactuals_are_off_by_default_and_leave_the_episode_unchanged() -> None:
    from cm_gym.memory.defaults import default_snapshot

    store = str(default_snapshot(TOY_BENCHMARK))
    plain, with_cf = (
        make_toy(store, task_order="sequential"),
        make_toy(store, task_order="sequential", counterfactuals=True),
    )
    for env in (plain, with_cf):
        env.reset(seed=5)
    for action in (1, 0, 1):
        a = plain.step(action)
        b = with_cf.step(action)
        assert "counterfactual" not in a[4] and "counterfactual" in b[4]
        assert a[1:4] == b[1:4] and np.array_equal(a[0], b[0])
        if a[2]:
            break
