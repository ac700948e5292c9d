"""Your own policy in the table: objects with SB3's predict and factories go through the same
protocol and metrics as the built-ins; mask-aware policies get masks; masked picks are loud."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

import cm_gym
from cm_gym.protocol import ProtocolError
from cm_gym.protocol.evaluation import load_policy
from cm_gym.protocol.report import results_table
from cm_gym.protocol.training import MaskedActionError
from tests.envs.toy_env import TOY_BENCHMARK, make_toy
from tests.policy_fixtures import AlwaysFour, HighestSlot, MaskSpy, make_policy

torch.set_num_threads(1)


def test_custom_policies_share_the_protocol_with_the_builtins() -> None:
    from cm_gym.memory.defaults import default_snapshot

    store = default_snapshot(TOY_BENCHMARK)
    ppo = MaskablePPO(
        "MlpPolicy", make_toy(str(store)), n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu"
    )
    ppo.learn(32)
    spy = MaskSpy()
    with pytest.warns(RuntimeWarning, match="'careless' picked a masked action"):
        results = cm_gym.evaluate_policies(
            {"ppo": ppo, "spy": spy, "factory": make_policy, "careless": AlwaysFour()},
            benchmark=TOY_BENCHMARK,
            store=store,
            baselines=("none", "top1"),
            seeds=(0, 1),
        )
    policies = results["policies"]
    assert list(policies) == ["none", "top1", "ppo", "spy", "factory", "careless"]
    n_eval = results["split"]["eval"]
    for name in ("ppo", "spy", "factory", "careless"):
        assert len(policies[name]["per_seed"]) == 2 and policies[name]["per_seed"][0]["n_tasks"] == n_eval
        assert "paired_vs_none" in policies[name]
    assert spy.masks and all(m[0] for m in spy.masks)
    assert policies["ppo"]["masked_actions"] == 0 and policies["factory"]["masked_actions"] == 0
    assert policies["careless"]["masked_actions"] > 0
    # the hand-written "highest valid slot" is exactly the spy's rule: same episodes, same score
    assert policies["factory"]["mean"]["score"] == policies["spy"]["mean"]["score"]
    table = results_table(results, width=100)
    assert "careless" in table and "masked action" in table and max(map(len, table.splitlines())) <= 100
    with pytest.raises(MaskedActionError, match="masked action 4"):
        cm_gym.evaluate_policies(
            {"careless": AlwaysFour()}, benchmark=TOY_BENCHMARK, store=store, on_masked="error"
        )


def test_bad_policy_sources_are_one_line_errors() -> None:
    assert load_policy("mine=tests.policy_fixtures:make_policy")[0] == "mine"
    name, obj = load_policy("tests.policy_fixtures:HighestSlot")
    assert name == "HighestSlot" and obj is HighestSlot
    for text, match in (
        ("tests.policy_fixtures", "expected"),
        ("no_such_module_xyz:f", "cannot import"),
        ("tests.policy_fixtures:nope", "no attribute"),
        ("tests.policy_fixtures:np", "neither a policy"),
    ):
        with pytest.raises(ProtocolError, match=match):
            load_policy(text)
    with pytest.raises(ProtocolError, match="built-in"):
        cm_gym.evaluate_policies({"top1": HighestSlot()}, benchmark=TOY_BENCHMARK, store="x")
    with pytest.raises(ProtocolError, match="no predict"):
        cm_gym.evaluate_policies({"f": lambda env, seed: object()}, benchmark=TOY_BENCHMARK, seeds=(0,))


def test_a_policy_returning_floats_is_refused_by_the_env() -> None:
    class Floaty:
        def predict(self, obs: np.ndarray, **kw: object) -> tuple[np.ndarray, None]:
            return np.array(1.0), None

    with pytest.raises(cm_gym.envs.InvalidActionError, match="not an integer"):
        cm_gym.evaluate_policies({"floaty": Floaty()}, benchmark=TOY_BENCHMARK)


def test_evaluate_policies_reports_progress_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """Minutes of evaluation are not silent: one ``evaluate`` phase counted in policy × seed runs
    (as `cm-gym evaluate` shows it); ``progress=False`` hides it (issue 36)."""
    from cm_gym.memory.defaults import default_snapshot

    store = default_snapshot(TOY_BENCHMARK)
    capsys.readouterr()
    cm_gym.evaluate_policies({"mine": HighestSlot()}, benchmark=TOY_BENCHMARK, store=store, seeds=(0, 1))
    err = capsys.readouterr().err
    assert "evaluate: started (3 run)" in err  # none once (deterministic), mine once per seed
    assert "evaluate: 3/3 run (100%)" in err
    cm_gym.evaluate_policies(
        {"mine": HighestSlot()}, benchmark=TOY_BENCHMARK, store=store, seeds=(0,), progress=False
    )
    assert "evaluate:" not in capsys.readouterr().err
