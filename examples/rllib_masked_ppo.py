"""Train a masked PPO selector on RLlib (Ray's new API stack), with the mask bridge of cm_gym.

    pip install -e ".[ray]"                        # Ray is an optional extra
    python examples/rllib_masked_ppo.py --iterations 5 --env-runners 1

The env is ``cm_gym/SQL-v0`` wrapped by `cm_gym.envs.wrappers.ActionMaskObservation`, i.e. observations
``{"observations": Box(98), "action_mask": Box(0, 1, (5,))}``, and the policy is RLlib's
action-masking PPO module, which adds log(mask) to the logits so masked slots are never sampled.

Env registration in Ray workers: workers are fresh processes that never imported cm_gym, so
``config.environment("cm_gym/SQL-v0")`` fails there with ``gymnasium.error.NamespaceNotFound:
Namespace cm_gym not found``, followed by a misleading ``IndexError`` from RLlib. Register the env
creator `cm_gym.envs.wrappers.make_masked_env` instead (below): it is a module-level function of cm_gym,
so unpickling it in a worker imports cm_gym and every ``cm_gym/...`` id. For the unmasked env,
``config.environment("cm_gym:cm_gym/SQL-v0")`` does the same through Gymnasium's module prefix.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def build_config(env_config: dict[str, Any], env_runners: int, batch: int) -> Any:
    """A PPOConfig for the masked cm_gym env (imports Ray; nothing in cm_gym itself does)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    from cm_gym.envs.wrappers import make_masked_env

    register_env("cm_gym_masked", make_masked_env)
    return (
        PPOConfig()
        .environment("cm_gym_masked", env_config=env_config)
        .env_runners(num_env_runners=env_runners, num_envs_per_env_runner=1, rollout_fragment_length="auto")
        .training(train_batch_size_per_learner=batch, minibatch_size=min(64, batch), num_epochs=2, lr=3e-4)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ActionMaskingTorchRLModule, model_config={"head_fcnet_hiddens": [64, 64]}
            )
        )
    )


def train(
    env_config: dict[str, Any], iterations: int, env_runners: int = 1, batch: int = 256
) -> tuple[Any, list[dict]]:
    """Build the algorithm and run `iterations` training iterations; returns (algo, one summary
    per iteration). Ray must be initialised; the caller stops the algorithm."""
    algo = build_config(env_config, env_runners, batch).build_algo()
    history = []
    for i in range(iterations):
        started = time.perf_counter()
        runners = algo.train().get("env_runners", {})
        history.append(
            {
                "iteration": i + 1,
                "decisions": float(runners.get("num_env_steps_sampled_lifetime", 0)),
                "episode_return_mean": float(runners.get("episode_return_mean", float("nan"))),
                "seconds": time.perf_counter() - started,
            }
        )
    return algo, history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--env-id", default="cm_gym/SQL-v0", help="a registered cm_gym id (default cm_gym/SQL-v0)"
    )
    parser.add_argument(
        "--store", default=None, help="a frozen snapshot (default: the benchmark's default store)"
    )
    parser.add_argument("--iterations", type=int, default=5, help="PPO training iterations (default 5)")
    parser.add_argument("--env-runners", type=int, default=1, help="Ray env-runner workers (default 1)")
    parser.add_argument(
        "--batch", type=int, default=256, help="decisions per training iteration (default 256)"
    )
    args = parser.parse_args(argv)

    import ray

    env_config: dict[str, Any] = {"env_id": args.env_id, "mask_space": "box"}
    if args.store:
        env_config["store"] = args.store
    ray.init(
        num_cpus=max(2, args.env_runners + 1),
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024 * 1024,  # ample for a 98-dim env; starts faster than the default
    )
    try:
        algo, history = train(env_config, args.iterations, args.env_runners, args.batch)
        for h in history:
            print(
                f"iteration {h['iteration']}: {h['decisions']:.0f} decisions, "
                f"mean episode return {h['episode_return_mean']:+.3f} ({h['seconds']:.1f} s)"
            )
        algo.stop()
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
