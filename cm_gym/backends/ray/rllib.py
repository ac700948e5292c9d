"""Selector training on RLlib: ``cm-gym train --algo rllib-ppo|rllib-dqn`` (and `train_rllib`).

The same protocol as the SB3 path (`cm_gym.protocol.train_selector`): the env is the selection env
on T_train over the frozen snapshot (in the chosen observation layout), every `checkpoint_every`
decisions the same `CheckpointSelector` scores the greedy policy on the validation subset, saves
the checkpoint and keeps the one with the best mean validation return; the training record has the
same keys (``best_checkpoint``, ``best_step``, ``selection``, ``history``, …) plus ``algo``, so
``cm-gym evaluate`` reads it like an SB3 one.

* Masking: envs are wrapped in `ActionMaskObservation` (``Dict(observations, action_mask)``,
  RLlib's convention) and the RLModule applies the mask (`rllib_modules`).
* Registration: the env creator `make_rllib_env` is a module-level function of cm_gym, registered
  under `ENV_NAME` with Ray's registry (stored in the cluster), so every env-runner process —
  which never imported cm_gym — resolves it without user code.
* Shared read-only: every env runner opens the same frozen snapshot (read-only, hash-verified) and
  the same LLM response-cache file. A node that does not see the snapshot's path gets the file
  (and its manifest) through Ray's object store; so does the cache, replayed from a node copy.
* Hyper-parameters: DQN uses the paper's Table 3 (as the SB3 path); PPO uses RLlib's defaults with
  the same (64, 64) MLP and one training batch per checkpoint interval.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.backends.ray import shipping
from cm_gym.backends.ray.cluster import connect, require_ray
from cm_gym.core.types import CmGymError

logger = logging.getLogger(__name__)

ALGOS = ("rllib-ppo", "rllib-dqn")
#: the name the env creator is registered under in Ray's registry
ENV_NAME = "cm_gym_selection_masked"


class RLlibTrainingError(CmGymError):
    """RLlib training cannot run with these settings."""


# -- the env in every worker ---------------------------------------------------------------------
def _local_copy(path: str, files: Sequence[Any]) -> str:
    """`path` if this node sees it, else the shipped copy (one per node)."""
    if Path(path).is_file() or not files:
        return path
    ray = require_ray()
    folder = shipping.scratch_root("rllib") / hashlib.sha256(path.encode()).hexdigest()[:16]
    if not (folder / Path(path).name).is_file():
        shipping.unpack_dir(ray.get(files[0]), folder, done_marker=Path(path).name)
    return str(folder / Path(path).name)


def make_rllib_env(config: Mapping[str, Any]) -> Any:
    """Env creator for RLlib: the selection env over ``store`` and ``tasks`` (any env keyword
    argument in `config`), wrapped in `ActionMaskObservation` (Box mask, RLlib's convention).
    ``store_files`` / ``cache_files`` hold the shipped snapshot and cache for nodes without them."""
    from cm_gym.envs.selection import MemorySelectionEnv
    from cm_gym.envs.wrappers import ActionMaskObservation

    kwargs = {k: config[k] for k in config if k not in ("store_files", "cache_files", "num_envs")}
    kwargs["store"] = _local_copy(str(kwargs["store"]), config.get("store_files", ()))
    if kwargs.get("llm_cache"):
        kwargs["llm_cache"] = _local_copy(str(kwargs["llm_cache"]), config.get("cache_files", ()))
    return ActionMaskObservation(MemorySelectionEnv(**kwargs), mask_space="box")


def _ship(path: Path | None, sidecars: bool = False) -> list[Any]:
    """[ObjectRef of a folder holding `path` (and its sidecars)] or [] when there is none."""
    if path is None or not Path(path).is_file():
        return []
    ray = require_ray()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / path.name).write_bytes(shipping.copy_sqlite(path))
        if sidecars:
            for side in path.parent.glob(path.name + ".*"):
                if side.is_file() and not side.name.endswith(("-wal", "-shm", ".lock")):
                    shutil.copyfile(side, Path(tmp) / side.name)
        return [ray.put(shipping.pack_dir(Path(tmp)))]


# -- algorithm configuration ---------------------------------------------------------------------
def algorithm_config(
    algo: str,
    env_config: Mapping[str, Any],
    *,
    seed: int,
    env_runners: int,
    total_decisions: int,
    checkpoint_every: int,
) -> Any:
    """The RLlib `AlgorithmConfig` of `algo` on the masked selection env."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env

    from cm_gym.backends.ray.rllib_modules import ActionMaskingTorchRLModule, MaskedDQNTorchRLModule

    if algo not in ALGOS:
        raise RLlibTrainingError(f"unknown algorithm {algo!r}; choose from {', '.join(ALGOS)}")
    register_env(ENV_NAME, make_rllib_env)
    mlp = {"fcnet_hiddens": [64, 64], "fcnet_activation": "relu", "head_fcnet_hiddens": []}
    if algo == "rllib-ppo":
        from ray.rllib.algorithms.ppo import PPOConfig

        config = PPOConfig().training(
            train_batch_size_per_learner=checkpoint_every,
            minibatch_size=min(64, checkpoint_every),
            num_epochs=4,
            lr=3e-4,
            gamma=0.95,
        )
        module = RLModuleSpec(
            module_class=ActionMaskingTorchRLModule, model_config={**mlp, "vf_share_layers": False}
        )
    else:  # the paper's Table 3, as `cm_gym.agents.masked_dqn`
        from ray.rllib.algorithms.dqn import DQNConfig

        config = DQNConfig().training(
            lr=1e-3,
            adam_epsilon=1e-8,
            gamma=0.95,
            train_batch_size_per_learner=32,
            num_steps_sampled_before_learning_starts=100,
            target_network_update_freq=250,
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 10_000},
            epsilon=[(0, 0.30), (max(1, total_decisions // 2), 0.05)],
            training_intensity=32 / 4,  # one gradient step of 32 per 4 decisions (train_freq 4)
            double_q=False,
            dueling=False,
            n_step=1,
            num_atoms=1,
        )
        module = RLModuleSpec(
            module_class=MaskedDQNTorchRLModule,
            model_config={
                **mlp,
                "double_q": False,
                "dueling": False,
                "num_atoms": 1,
                "epsilon": config.epsilon,
            },
        )
    return (
        config.environment(ENV_NAME, env_config=dict(env_config))
        .framework("torch")
        .env_runners(num_env_runners=env_runners, num_envs_per_env_runner=1, num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .rl_module(rl_module_spec=module)
        .reporting(min_sample_timesteps_per_iteration=checkpoint_every, metrics_num_episodes_for_smoothing=20)
        .debugging(seed=seed, log_level="ERROR")
    )


# -- a trained module as a policy ------------------------------------------------------------------
class RLlibPolicy:
    """An RLlib RLModule behind SB3's ``predict`` (what `run_episodes` and ``cm-gym evaluate``
    call): greedy, masked by ``action_masks`` (slots outside the mask are never picked)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, None]:
        import torch
        from ray.rllib.core.columns import Columns

        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        obs = obs[None] if single else obs
        mask = (
            np.ones((len(obs), 5), np.float32)
            if action_masks is None
            else np.asarray(action_masks, np.float32)
        )
        mask = mask[None] if mask.ndim == 1 else mask
        batch = {Columns.OBS: {"observations": torch.as_tensor(obs), "action_mask": torch.as_tensor(mask)}}
        with torch.no_grad():
            out = self.module.forward_inference(batch)
        if Columns.ACTIONS in out:
            actions = np.asarray(out[Columns.ACTIONS], dtype=np.int64)
        else:
            actions = np.asarray(torch.argmax(out[Columns.ACTION_DIST_INPUTS], dim=-1), dtype=np.int64)
        return (np.array(actions[0]) if single else actions), None


def load_rllib_policy(checkpoint: str | Path) -> RLlibPolicy:
    """A policy from an RLModule checkpoint folder written by `train_rllib`."""
    require_ray()
    from ray.rllib.core.rl_module.rl_module import RLModule

    path = Path(checkpoint)
    if not (path / "module_state.pkl").is_file() and not any(path.glob("module_state*")):
        raise RLlibTrainingError(f"{path} is not an RLlib module checkpoint (no module_state in it)")
    return RLlibPolicy(RLModule.from_checkpoint(str(path.resolve())))


# -- training ---------------------------------------------------------------------------------------
class _ModuleModel:
    """What `CheckpointSelector` needs of a model, for an RLlib module: greedy masked ``predict``,
    ``save`` to a module folder, and a silent SB3 logger (RLlib reports its own metrics)."""

    def __init__(self) -> None:
        from stable_baselines3.common.logger import Logger

        self.module: Any = None
        self.logger = Logger(folder=None, output_formats=[])

    def predict(self, observation: np.ndarray, **kwargs: Any) -> tuple[np.ndarray, None]:
        return RLlibPolicy(self.module).predict(observation, **kwargs)

    def save(self, path: str | Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        self.module.save_to_path(str(Path(path).resolve()))


def train_rllib(
    cfg: Any, snapshot: Any, prepared: Any, seed: int, llm: Any = None, layout: str = "paper"
) -> dict[str, Any]:
    """Train one selector seed with ``cfg.algo`` on RLlib on `layout` observations
    (`cm_gym.protocol.train_selector`'s contract, checkpoint selection and record, plus ``algo``
    and ``env_runners``): one training iteration samples `checkpoint_every` decisions, after each
    `CheckpointSelector` scores the greedy module on the validation tasks and keeps the best."""
    from cm_gym.protocol import make_env
    from cm_gym.protocol.training import CheckpointSelector

    class _Selector(CheckpointSelector):
        checkpoint_suffix = ""  # RLlib module checkpoints are folders

    connect(cfg.ray_address, num_cpus=max(2, cfg.env_runners + 1))
    val = list(prepared.split.validation)
    env_config: dict[str, Any] = {
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.env_config().items()},
        "store": str(Path(snapshot.path).resolve()),
        "tasks": list(prepared.split.train),
        "task_order": "random",
        "obs_layout": layout,
        "store_files": _ship(Path(snapshot.path), sidecars=True),
        "cache_files": _ship(Path(cfg.llm_cache)) if cfg.llm_cache else [],
    }
    algo = algorithm_config(
        cfg.algo,
        env_config,
        seed=seed,
        env_runners=cfg.env_runners,
        total_decisions=cfg.total_decisions,
        checkpoint_every=cfg.checkpoint_every,
    ).build_algo()
    run_name = f"seed{seed}" if layout == "paper" else f"{layout}-seed{seed}"
    model = _ModuleModel()
    selector = _Selector(
        make_env(cfg, snapshot, val, llm, obs_layout=layout),
        val,
        Path(cfg.out_dir) / "selector" / run_name,
        every=cfg.checkpoint_every,
    )
    selector.model = model
    started = time.perf_counter()
    try:
        while selector.num_timesteps < cfg.total_decisions:
            result = algo.train()
            sampled = result.get("env_runners", {}).get("num_env_steps_sampled_lifetime")
            if not sampled or int(sampled) <= selector.num_timesteps:
                raise RLlibTrainingError(f"{cfg.algo} sampled no decisions in a training iteration")
            selector.num_timesteps = int(sampled)
            model.module = algo.get_module()
            selector.evaluate_checkpoint()
    finally:
        algo.stop()
        selector.val_env.close()
    return {
        "seed": seed,
        "layout": layout,
        "algo": cfg.algo,
        "env_runners": cfg.env_runners,
        "validation_tasks": len(val),
        "selection": selector.selection_noise(),
        "best_checkpoint": str(selector.best_path),
        "best_step": selector.best_step,
        "best_validation_return": selector.best_return,
        "history": selector.history,
        "train_seconds": time.perf_counter() - started,
    }


class RLlibLearner:
    """The ``cm_gym.learners`` plugin of ``--algo rllib-ppo`` / ``rllib-dqn`` (pyproject.toml): the
    protocol trains and loads through it without importing this module by name."""

    train = staticmethod(train_rllib)
    load = staticmethod(load_rllib_policy)

    @staticmethod
    def owns(checkpoint: str | Path) -> bool:
        """RLlib module checkpoints are folders (masked-DQN ones are zip files)."""
        return Path(checkpoint).is_dir()


LEARNER = RLlibLearner()
