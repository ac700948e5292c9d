"""RLlib training of the selector (``cm-gym train --algo rllib-ppo|rllib-dqn``) on the local Ray
cluster: the env is registered in every env-runner process without user code, the mask reaches the
RLModule (masked slots are never chosen, in exploration or greedily), checkpoints are selected on
the validation tasks like the SB3 path, and ``cm-gym evaluate`` reads the training record."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from cm_gym.cli import main

SMALL = ["--benchmark", "SQL", "--n-build", "16", "--n-train", "24", "--n-eval", "8", "--seeds", "0"]
QUIET = ["--no-tensorboard", "--no-progress", "--obs-layouts", "paper"]


def test_masked_dqn_module_never_explores_or_exploits_a_masked_slot() -> None:
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from cm_gym.backends.ray.rllib_modules import MaskedDQNTorchRLModule

    space = gym.spaces.Dict(
        {
            "observations": gym.spaces.Box(-np.inf, np.inf, (98,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (5,)),
        }
    )
    config = {
        "fcnet_hiddens": [16],
        "double_q": False,
        "dueling": False,
        "num_atoms": 1,
        "epsilon": [(0, 1.0)],
    }
    module = RLModuleSpec(
        module_class=MaskedDQNTorchRLModule,
        observation_space=space,
        action_space=gym.spaces.Discrete(5),
        model_config=config,
    ).build()
    rng = np.random.default_rng(0)
    mask = (rng.random((512, 5)) < 0.4).astype(np.float32)
    mask[:, 0] = 1.0  # skip is always valid
    obs = torch.as_tensor(rng.normal(size=(512, 98)).astype(np.float32))
    batch = lambda: {Columns.OBS: {"observations": obs, "action_mask": torch.as_tensor(mask)}}  # noqa: E731
    explored = module.forward_exploration(batch(), t=0)[Columns.ACTIONS].numpy()  # ε = 1: all random
    greedy = module.forward_inference(batch())[Columns.ACTIONS].numpy()
    rows = np.arange(512)
    assert mask[rows, explored].all() and mask[rows, greedy].all()
    assert len(set(explored[mask[:, 1:].sum(1) > 1].tolist())) > 2  # uniform among valid slots, not skip only
    with pytest.raises(ValueError, match="ActionMaskObservation"):
        RLModuleSpec(
            module_class=MaskedDQNTorchRLModule,
            observation_space=space["observations"],
            action_space=gym.spaces.Discrete(5),
            model_config=config,
        ).build()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["rllib-ppo", "rllib-dqn"])
def test_train_with_rllib_then_evaluate(ray_address: str, tmp_path: Path, algo: str) -> None:
    out = tmp_path / algo
    decisions = "64" if algo == "rllib-ppo" else "160"  # DQN learns after 100 decisions
    argv = ["train", *SMALL, *QUIET, "--algo", algo, "--ray-address", ray_address, "--out-dir", str(out)]
    assert main([*argv, "--total-decisions", decisions, "--checkpoint-every", "32"]) == 0
    record = json.loads((out / "training.json").read_text())
    (seed,) = record["training"]
    assert seed["algo"] == algo and record["config"]["algo"] == algo
    assert seed["layout"] == "paper" and seed["selection"]["validation_tasks"] == seed["validation_tasks"]
    steps = [h["step"] for h in seed["history"]]
    assert len(steps) >= 2 and steps == sorted(steps) and steps[-1] >= int(decisions)
    best = max(seed["history"], key=lambda h: h["val_return"])
    assert seed["best_validation_return"] == best["val_return"] and seed["best_step"] == best["step"]
    assert Path(seed["best_checkpoint"]).is_dir()
    # evaluate reads training.json like an SB3 one; a masked pick would be an error here
    argv = ["evaluate", "--out-dir", str(out), "--policies", "none", "cf_memory", "--on-masked", "error"]
    assert main([*argv, "--overwrite", "--format", "json", "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    cf = results["policies"]["cf_memory"]
    assert cf["masked_actions"] == 0 and len(cf["per_seed"]) == 1
    assert 0.0 <= cf["mean"]["score"]["mean"] <= 100.0 and cf["mean"]["n_tasks"]["mean"] == 8
