"""Masked PPO on RLlib through the mask bridge, with a real env-runner worker process (which must
find the cm_gym ids without user code). Ray is an optional extra: skipped when it is not installed
(CI installs it: see the README's test command)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="Ray is an optional extra: pip install -e '.[ray]'")

REPO = Path(__file__).resolve().parents[3]


def _example():  # noqa: ANN202 - the example module
    spec = importlib.util.spec_from_file_location(
        "rllib_masked_ppo", REPO / "examples" / "rllib_masked_ppo.py"
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.slow
def test_masked_ppo_trains_on_rllib_and_never_picks_a_masked_slot() -> None:
    import ray
    import torch

    from cm_gym.envs.wrappers import make_masked_env
    from cm_gym.memory.defaults import default_snapshot

    env_config = {"env_id": "cm_gym/SQL-v0", "store": str(default_snapshot("SQL")), "mask_space": "box"}
    # tests/backends/ray keeps one session-wide cluster connected: join it rather than init twice
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 1024 * 1024
        )
    try:
        algo, history = _example().train(env_config, iterations=2, env_runners=1, batch=64)
        try:
            assert [h["iteration"] for h in history] == [1, 2]
            assert history[-1]["decisions"] >= 128 and math.isfinite(history[-1]["episode_return_mean"])
            module = algo.get_module()
            env = make_masked_env(env_config)
            obs, info = env.reset(seed=0)
            for _ in range(30):
                batch = {"obs": {k: torch.as_tensor(np.asarray(v)[None]) for k, v in obs.items()}}
                logits = module.forward_inference(batch)["action_dist_inputs"][0]
                action = int(torch.argmax(logits))
                assert obs["action_mask"][action] == 1  # the masked logits never favour a masked slot
                obs, _, terminated, truncated, info = env.step(action)
                assert not info["invalid_action"]
                if terminated or truncated:
                    obs, info = env.reset()
        finally:
            algo.stop()
    finally:
        if started:
            ray.shutdown()
