"""The paper's protocol (Appendix C.3): build → freeze → train → evaluate.

T_build ∪ T_train must be disjoint from T_eval (Eq. 14); this is checked before memory is frozen
and again against the source tasks of a reused snapshot. The store is frozen before the selector is
trained; evaluation opens it read-only and feeds nothing back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.provenance import provenance
from cm_gym.registry import BenchmarkSpec, get_benchmark, get_domain
from cm_gym.splits import make_split
from cm_gym.types import CmGymError, Split, SplitOverlapError, Task

logger = logging.getLogger(__name__)

POLICIES = ("none", "top1", "random", "cf_memory", "oracle")
#: selector learners: SB3 (built in) or RLlib (the optional ``ray`` extra)
ALGOS = ("masked-dqn", "rllib-ppo", "rllib-dqn")
POLICY_LABELS = {
    "none": "None (always skip)",
    "top1": "Top-1 (always use)",
    "random": "Random valid",
    "cf_memory": "CF Memory (masked DQN)",
    "cf_memory_extended": "CF Memory (masked DQN, extended z_t)",
    "oracle": "Oracle (peeks; upper bound)",
}
#: Baselines every policy is compared with, by a paired bootstrap over tasks (SPEC §8).
CI_BASELINES = ("random", "top1")


def policy_label(key: str, algo: str = "masked-dqn") -> str:
    """The table label of a results key; a selector trained by RLlib says so instead of "DQN"."""
    label = POLICY_LABELS.get(key, key)
    if algo != "masked-dqn" and key.startswith("cf_memory"):
        label = label.replace("masked DQN", f"masked RLlib {algo.removeprefix('rllib-').upper()}")
    return label


def selector_name(layout: str) -> str:
    """The results key of the masked DQN trained on an observation layout."""
    return "cf_memory" if layout == "paper" else f"cf_memory_{layout}"


class ProtocolError(CmGymError):
    """A protocol input is unusable (wrong store, checkpoint, split)."""


@dataclass
class ProtocolConfig:
    """Everything one protocol run needs; defaults are the paper's (Table 3, Appendix C)."""

    benchmark: str = "SQL"
    #: a data folder in the benchmark's layout (--data DIR); None = the benchmark's own data
    data: Path | None = None
    out_dir: Path = Path("runs/SQL")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    total_decisions: int = 2000
    checkpoint_every: int = 250
    agent: str = "react"
    llm: str = "simulated"
    llm_seed: int = 0
    llm_cache: Path | None = None  # None: the default file under $CM_GYM_CACHE (real LLMs only)
    llm_cache_mode: str = "rw"  # rw | ro (replay only: a miss is an error) | off
    concurrency: int = 8  # LLM calls in flight at most where calls are independent (real LLMs)
    revision_rates: Path | None = None  # the simulator's revision rates (`cm-gym calibrate`)
    split_seed: int = 12345
    max_decisions: int = 3
    k: int = 3
    use_conditions: bool = True
    retrieval: str = "matched"
    retention: str = "utility"
    store: Path | None = None
    n_build: int | None = None
    n_train: int | None = None
    n_eval: int | None = None
    policies: tuple[str, ...] = POLICIES
    #: one masked DQN per observation layout: "paper" (98 dims) and "extended" (106, beyond the paper)
    obs_layouts: tuple[str, ...] = ("paper", "extended")
    #: the checkpoint-selection subset of T_train (see `train_selector` for why half)
    validation_fraction: float = 0.5
    on_masked: str = "warn"  # a policy picking masked actions: warn (they run as skip) | error
    tensorboard: bool = True
    progress: bool = True
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: your policies, name -> policy or factory(env, seed) (`cm_gym.evaluation`); their names
    #: must also be in `policies` to be evaluated.
    custom_policies: dict[str, Any] = field(default_factory=dict)
    #: the selector's learner: SB3's masked DQN, or RLlib PPO / DQN (`cm_gym.ray_backend.rllib`)
    algo: str = "masked-dqn"
    env_runners: int = 1  # RLlib env-runner processes collecting decisions
    ray_address: str | None = None  # RLlib on an existing Ray cluster (None: a local instance)

    def validate(self) -> None:
        """Refuse unusable values with one `ProtocolError` line before any work starts."""
        ints = {"total_decisions": 1, "checkpoint_every": 1, "max_decisions": 1, "concurrency": 1}
        ints |= {"llm_seed": 0, "split_seed": 0, "k": 0}
        ints |= {n: 1 for n in ("n_build", "n_train", "n_eval") if getattr(self, n) is not None}
        for name, low in ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ProtocolError(f"{name} must be an integer >= {low}, got {value!r}")
        if not self.seeds or any(
            isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in self.seeds
        ):
            raise ProtocolError(f"seeds must be non-negative integers, got {self.seeds!r}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ProtocolError(f"seeds must be distinct, got {self.seeds!r}")
        if self.k > 4:
            raise ProtocolError(f"k must be in 0..4 (the selector has 4 slots), got {self.k}")
        unknown = [p for p in self.policies if p not in POLICIES and p not in self.custom_policies]
        if unknown:
            raise ProtocolError(f"unknown policy {unknown[0]!r}; built-in: {', '.join(POLICIES)}")
        if self.algo not in ALGOS:
            raise ProtocolError(f"algo must be one of {', '.join(ALGOS)}, got {self.algo!r}")
        if (
            isinstance(self.env_runners, bool)
            or not isinstance(self.env_runners, int)
            or self.env_runners < 0
        ):
            raise ProtocolError(f"env_runners must be an integer >= 0, got {self.env_runners!r}")
        if self.on_masked not in ("warn", "error"):
            raise ProtocolError(f"on_masked must be 'warn' or 'error', got {self.on_masked!r}")
        from cm_gym.features import OBS_LAYOUTS

        if not self.obs_layouts or any(layout not in OBS_LAYOUTS for layout in self.obs_layouts):
            raise ProtocolError(
                f"obs_layouts must be a non-empty subset of {OBS_LAYOUTS}, got {self.obs_layouts}"
            )
        if not 0.0 < self.validation_fraction <= 1.0:
            raise ProtocolError(f"validation_fraction must be in (0, 1], got {self.validation_fraction}")
        if self.revision_rates is not None and not self.llm.startswith("simulated"):
            raise ProtocolError(f"--revision-rates configures the simulated LLM, not {self.llm!r}")

    def llm_kwargs(self) -> dict[str, Any]:
        """Extra `make_llm` arguments: the simulator's revision-rates file, when one is given."""
        return {"revision_rates": str(self.revision_rates)} if self.revision_rates is not None else {}

    def env_config(self) -> dict[str, Any]:
        """Keyword arguments shared by every env of this run."""
        return {
            "benchmark": self.benchmark,
            "llm": self.llm,
            "llm_cache": self.llm_cache,
            "llm_cache_mode": self.llm_cache_mode,
            "llm_seed": self.llm_seed,
            "agent": self.agent,
            "max_decisions": self.max_decisions,
            "k": self.k,
            "use_conditions": self.use_conditions,
            "retrieval": self.retrieval,
            "data": self.data,
            **({"llm_kwargs": self.llm_kwargs()} if self.llm_kwargs() else {}),
            **self.env_kwargs,
        }


@dataclass(frozen=True)
class Prepared:
    """The benchmark, its tasks by id and the checked split of one run."""

    spec: BenchmarkSpec
    tasks: dict[str, Task]
    split: Split


def prepare(cfg: ProtocolConfig) -> Prepared:
    """Load the benchmark's tasks and make the (capped) split; refuse any overlap (Eq. 14)."""
    cfg.validate()
    spec = get_benchmark(cfg.benchmark)
    tasks = spec.load(cfg.data)
    split = make_split(tasks, seed=cfg.split_seed, by_env=spec.split_by_env)
    train = split.train[: cfg.n_train] if cfg.n_train else split.train
    validation = train[: max(1, int(round(len(train) * cfg.validation_fraction)))]
    split = Split(
        build=split.build[: cfg.n_build] if cfg.n_build else split.build,
        train=train,
        validation=validation,
        eval=split.eval[: cfg.n_eval] if cfg.n_eval else split.eval,
    )
    split.check()
    return Prepared(spec, {t.task_id: t for t in tasks}, split)


def check_snapshot(snapshot: Any, prepared: Prepared) -> None:
    """Refuse a snapshot of another domain / benchmark, or one built on evaluation tasks."""
    domain = get_domain(prepared.spec.domain_name)
    if snapshot.domain != domain.name:
        raise ProtocolError(
            f"store {snapshot.path} holds {snapshot.domain!r} records, benchmark {prepared.spec.name!r} needs {domain.name!r}"
        )
    if snapshot.benchmark and snapshot.benchmark != prepared.spec.name:
        raise ProtocolError(
            f"store {snapshot.path} was built for {snapshot.benchmark!r}, not {prepared.spec.name!r}"
        )
    leaked = sorted({r.source_task_id for r in snapshot.records} & set(prepared.split.eval))
    processed = sorted(set(snapshot.processed_task_ids) & set(prepared.split.eval))
    if leaked or processed:
        ids = ", ".join((leaked or processed)[:10])
        raise SplitOverlapError(f"store {snapshot.path} was built on evaluation tasks: {ids}")


def make_protocol_llm(cfg: ProtocolConfig, prepared: Prepared) -> Any:
    """The one LLM of a run (build, training, evaluation), behind the response cache: a real
    endpoint always (`cfg.llm_cache` or the default file; "ro" replays only), the simulator only
    when `cfg.llm_cache` is given."""
    from cm_gym.llm.factory import make_llm

    return make_llm(
        cfg.llm,
        seed=cfg.llm_seed,
        task_lookup=prepared.tasks.get,
        cache_path=cfg.llm_cache,
        cache_mode=cfg.llm_cache_mode,
        concurrency=cfg.concurrency,
        **cfg.llm_kwargs(),
    )


def llm_stats(llm: Any) -> dict[str, Any]:
    """Live vs cached LLM calls of a run (empty for an uncached LLM)."""
    stats = getattr(llm, "stats", None)
    return dict(stats()) if callable(stats) else {}


def build_snapshot(
    cfg: ProtocolConfig,
    prepared: Prepared,
    progress: Callable[[int, int], None] | None = None,
    llm: Any = None,
) -> Path:
    """Construct memory on T_build (Algorithm 1, lines 3–14) and freeze it into a snapshot."""
    from cm_gym.memory.construction import ConstructionConfig, build_memory
    from cm_gym.memory.store import RecordStore
    from cm_gym.prefetch import prefetch_first_drafts

    domain = get_domain(prepared.spec.domain_name)
    mem_dir = Path(cfg.out_dir) / "memory"
    mem_dir.mkdir(parents=True, exist_ok=True)
    store_path, snapshot_path = mem_dir / "store.sqlite", mem_dir / "snapshot.sqlite"
    build_tasks = [prepared.tasks[i] for i in prepared.split.build]
    llm = llm if llm is not None else make_protocol_llm(cfg, prepared)
    with RecordStore(store_path, domain=domain.name, benchmark=prepared.spec.name) as store:
        # the first draft of every task depends on no memory: ask for them all at once (real LLMs)
        todo = [t for t in build_tasks if t.task_id not in store.processed_task_ids]
        prefetch_first_drafts(llm, domain, todo, cfg.agent, concurrency=cfg.concurrency)
        summary = build_memory(
            domain,
            build_tasks,
            store,
            llm,
            domain.make_evaluator(),
            ConstructionConfig(retention=cfg.retention),
            agent_kind=cfg.agent,
            max_decisions=cfg.max_decisions,
            progress=progress,
        )
        store.freeze(snapshot_path, overwrite=True)
    (mem_dir / "build_summary.json").write_text(json.dumps(_jsonable(summary), indent=2))
    logger.info("memory built: %s", summary)
    return snapshot_path


def load_snapshot(path: Path, prepared: Prepared) -> Any:
    """Open a frozen snapshot read-only and check it against the run (before any work); a live,
    unfrozen store is refused."""
    from cm_gym.memory.snapshot import FrozenStore

    snapshot = FrozenStore.open(path)  # verified: manifest present and its sha256 matches
    check_snapshot(snapshot, prepared)
    return snapshot


def make_env(
    cfg: ProtocolConfig, snapshot: Any, task_ids: Sequence[str], llm: Any = None, **overrides: Any
) -> Any:
    """A selector env over the given task ids, reading the frozen snapshot (with the run's shared
    `llm` when given, else one built from `cfg`)."""
    from cm_gym.envs.selection import MemorySelectionEnv

    kwargs = {**cfg.env_config(), **overrides}
    if llm is not None:
        kwargs.update(llm=llm, llm_cache=None)
        kwargs.pop("llm_kwargs", None)  # the shared LLM was built with them
    return MemorySelectionEnv(store=snapshot, tasks=list(task_ids), **kwargs)


def train_selector(
    cfg: ProtocolConfig, snapshot: Any, prepared: Prepared, seed: int, llm: Any = None, layout: str = "paper"
) -> dict[str, Any]:
    """Train the masked DQN on `layout` observations for `total_decisions` on T_train; keep the
    checkpoint with the best mean return on the validation subset of the training tasks (paper
    C.3). The subset is `validation_fraction` of T_train (default half: 120 SQL tasks), because
    with the paper-sized subsets of ~50 tasks the standard error of a checkpoint's mean return
    exceeds the differences between checkpoints; the record reports that SE and the paired SE of
    best − runner-up, so a reader can see whether the choice was noise."""
    import torch

    if cfg.algo != "masked-dqn":  # RLlib: same protocol, checkpoint selection and record
        from cm_gym.ray_backend.rllib import train_rllib

        return train_rllib(cfg, snapshot, prepared, seed, llm, layout)
    from cm_gym.agents.masked_dqn import MaskedDQN
    from cm_gym.training import CheckpointSelector

    torch.set_num_threads(1)  # a (64, 64) MLP is ~10x slower with several threads on a small box
    val = prepared.split.validation
    train_ids = list(prepared.split.train)
    env = make_env(cfg, snapshot, train_ids, llm, task_order="random", obs_layout=layout)
    val_env = make_env(cfg, snapshot, val, llm, obs_layout=layout)
    run_name = f"seed{seed}" if layout == "paper" else f"{layout}-seed{seed}"
    seed_dir = Path(cfg.out_dir) / "selector" / run_name
    tb = str(Path(cfg.out_dir) / "tensorboard") if cfg.tensorboard else None
    if tb is not None:  # a rerun of this seed replaces its logs instead of adding seedN_2
        from cm_gym.outputs import remove_tensorboard_runs

        remove_tensorboard_runs(Path(tb), run_name)
    model = MaskedDQN("MlpPolicy", env, seed=seed, tensorboard_log=tb, verbose=0)
    callback = CheckpointSelector(val_env, val, seed_dir, every=cfg.checkpoint_every)
    started = time.perf_counter()
    model.learn(
        total_timesteps=cfg.total_decisions, callback=callback, tb_log_name=run_name, progress_bar=False
    )
    if callback.best_step < 0:  # shorter than one checkpoint interval: score the final policy
        callback.evaluate_checkpoint()
    model.logger.close()  # flush and close the TensorBoard writer
    env.close()
    val_env.close()
    return {
        "seed": seed,
        "layout": layout,
        "validation_tasks": len(val),
        "selection": callback.selection_noise(),
        "best_checkpoint": str(callback.best_path),
        "best_step": callback.best_step,
        "best_validation_return": callback.best_return,
        "history": callback.history,
        "train_seconds": time.perf_counter() - started,
    }


def train_layouts(
    cfg: ProtocolConfig,
    snapshot: Any,
    prepared: Prepared,
    llm: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One selector per (observation layout, seed), in that order."""
    jobs = [(layout, seed) for layout in cfg.obs_layouts for seed in cfg.seeds]
    out = []
    for i, (layout, seed) in enumerate(jobs):
        if progress:
            progress("train", i, len(jobs))
        out.append(train_selector(cfg, snapshot, prepared, seed, llm, layout))
        if progress:
            progress("train", i + 1, len(jobs))
    return out


Checkpoints = Mapping[int, str] | Mapping[str, Mapping[int, str]]


def checkpoints_by_layout(checkpoints: Checkpoints) -> dict[str, dict[int, str]]:
    """``{seed: path}`` (paper layout) or ``{layout: {seed: path}}`` → ``{layout: {seed: path}}``."""
    if all(isinstance(v, str) for v in checkpoints.values()):
        return {"paper": {int(k): str(v) for k, v in checkpoints.items()}}  # type: ignore[arg-type]
    return {str(k): {int(s): str(p) for s, p in v.items()} for k, v in checkpoints.items()}  # type: ignore[union-attr]


def make_policy(name: str, env: Any, seed: int, checkpoint: str | None = None) -> Any:
    """A policy by its protocol name; "cf_memory" loads a masked-DQN checkpoint."""
    from cm_gym.agents.baselines import AlwaysSkip, Oracle, RandomValid, TopOne

    if name == "none":
        return AlwaysSkip()
    if name == "top1":
        return TopOne()
    if name == "random":
        return RandomValid(seed=seed)
    if name == "oracle":
        return Oracle(env)
    if name == "cf_memory":
        from cm_gym.agents.masked_dqn import MaskedDQN

        if checkpoint is None:
            raise ProtocolError("cf_memory needs a trained checkpoint")
        if Path(checkpoint).is_dir():  # an RLlib module checkpoint (`cm-gym train --algo rllib-*`)
            from cm_gym.ray_backend.rllib import load_rllib_policy

            return load_rllib_policy(checkpoint)
        space = getattr(env, "observation_space", None)  # refuses a checkpoint of another layout
        return MaskedDQN.load(checkpoint, env=None, device="cpu", observation_space=space)
    raise ProtocolError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")


def resolve_policy(cfg: ProtocolConfig, name: str, env: Any, seed: int, checkpoint: str | None) -> Any:
    """A built-in policy by name, or one of `cfg.custom_policies` for this seed."""
    if name in cfg.custom_policies:
        from cm_gym.evaluation import instantiate_policy

        return instantiate_policy(name, cfg.custom_policies[name], env, seed)
    return make_policy(name, env, seed, checkpoint)


def evaluate_policies(
    cfg: ProtocolConfig, snapshot: Any, prepared: Prepared, checkpoints: Checkpoints, llm: Any = None
) -> dict[str, Any]:
    """Evaluate every policy on T_eval with store and policy frozen. Deterministic policies are
    run once and shared across seeds; random and CF Memory run once per seed, CF Memory once per
    trained observation layout (on an env of that layout: same tasks, LLM and world model). Every
    policy carries paired bootstrap CIs against random valid and top-1 (``paired_ci``)."""
    from cm_gym.evaluation import report_masked
    from cm_gym.metrics import aggregate_seeds, paired, paired_comparisons, summarize
    from cm_gym.training import run_episodes

    by_layout = checkpoints_by_layout(checkpoints)
    envs: dict[str, Any] = {}
    prefetch = _EpisodePrefetch(cfg, snapshot, prepared, llm)
    names: list[tuple[str, str, str]] = []  # (results key, policy name, layout)
    for name in cfg.policies:
        if name == "cf_memory" and name not in cfg.custom_policies:
            names += [(selector_name(layout), name, layout) for layout in by_layout or {"paper": {}}]
        else:
            names.append((name, name, "paper"))
    results: dict[str, Any] = {}
    episodes_of: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for key, name, layout in names:
        if layout not in envs:
            envs[layout] = make_env(
                cfg, snapshot, prepared.split.eval, llm, task_order="sequential", obs_layout=layout
            )
        env, ckpts = envs[layout], by_layout.get(layout, {})
        per_seed: dict[int, list[dict[str, Any]]] = {}
        for seed in cfg.seeds:
            if name in ("none", "top1", "oracle") and per_seed:
                per_seed[seed] = next(iter(per_seed.values()))
                continue
            policy = resolve_policy(cfg, name, env, seed, ckpts.get(seed))
            prefetch(name, seed, policy, ckpts.get(seed), layout)
            on_masked = "error" if cfg.on_masked == "error" else "count"
            per_seed[seed] = run_episodes(env, policy, prepared.split.eval, on_masked=on_masked)
        episodes_of[key] = per_seed
        summaries = [summarize(eps) for eps in per_seed.values()]
        masked = sum(e.get("invalid_actions", 0) for eps in per_seed.values() for e in eps)
        report_masked(key, masked, sum(e["decisions"] for eps in per_seed.values() for e in eps))
        results[key] = {
            "label": policy_label(key, cfg.algo),
            "layout": layout if name == "cf_memory" else None,
            "per_seed": summaries,
            "mean": aggregate_seeds(summaries),
            "masked_actions": masked,
        }
    if "none" in episodes_of:
        base = next(iter(episodes_of["none"].values()))
        for name, per_seed in episodes_of.items():
            if name != "none":
                results[name]["paired_vs_none"] = [paired(base, eps) for eps in per_seed.values()]
    for name, comparisons in paired_comparisons(episodes_of, CI_BASELINES).items():
        results[name]["paired_ci"] = comparisons
    for env in envs.values():
        env.close()
    prefetch.close()
    return results


class _EpisodePrefetch:
    """With a real LLM behind a writable cache and `cfg.concurrency` > 1: before a policy's
    evaluation episodes run (one by one, as always), play them all in lockstep on a second env whose
    LLM only records, and fetch their calls concurrently. The episodes then replay from the cache:
    the results are those of the sequential run, whatever the concurrency."""

    def __init__(self, cfg: ProtocolConfig, snapshot: Any, prepared: Prepared, llm: Any) -> None:
        from cm_gym.llm.batch import RecordingLLM
        from cm_gym.llm.cached import cached_llm_of

        self.cached = cached_llm_of(llm) if cfg.concurrency > 1 else None
        self.cfg, self.task_ids, self.snapshot = cfg, prepared.split.eval, snapshot
        self.envs: dict[str, Any] = {}  # one recording env per observation layout
        self.recording = RecordingLLM(self.cached) if self.cached is not None else None

    def __call__(
        self, name: str, seed: int, policy: Any, checkpoint: str | None, layout: str = "paper"
    ) -> None:
        if self.cached is None:
            return
        from cm_gym.prefetch import prefetch_episodes

        if layout not in self.envs:
            self.envs[layout] = make_env(
                self.cfg,
                self.snapshot,
                self.task_ids,
                self.recording,
                task_order="sequential",
                obs_layout=layout,
            )
        env = self.envs[layout]
        ahead = make_policy(name, env, seed, checkpoint) if name == "oracle" else policy
        stats = prefetch_episodes(env, ahead, self.task_ids, self.cached, concurrency=self.cfg.concurrency)
        logger.info(
            "prefetched %d LLM calls for %s (seed %d) in %.1f s", stats.calls, name, seed, stats.seconds
        )

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def run_protocol(
    cfg: ProtocolConfig, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Build (or reuse) and freeze memory, train one selector per seed, evaluate all policies, and
    write ``results.json`` into `cfg.out_dir`. Returns the results dict."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    prepared = prepare(cfg)
    llm = make_protocol_llm(cfg, prepared)
    t0 = time.perf_counter()
    if cfg.store is None:
        snapshot_path = build_snapshot(
            cfg, prepared, progress=(lambda i, n: progress("build", i, n)) if progress else None, llm=llm
        )
    else:
        snapshot_path = Path(cfg.store)
    snapshot = load_snapshot(snapshot_path, prepared)
    timings["build_seconds"] = time.perf_counter() - t0
    training: list[dict[str, Any]] = []
    checkpoints: dict[str, dict[int, str]] = {}
    if "cf_memory" in cfg.policies and "cf_memory" not in cfg.custom_policies:
        training = train_layouts(cfg, snapshot, prepared, llm, progress)
        for record in training:
            checkpoints.setdefault(record["layout"], {})[record["seed"]] = record["best_checkpoint"]
    timings["train_seconds"] = time.perf_counter() - t0 - timings["build_seconds"]
    if progress:
        progress("evaluate", 0, 1)
    t1 = time.perf_counter()
    policies = evaluate_policies(cfg, snapshot, prepared, checkpoints, llm)
    timings["evaluate_seconds"] = time.perf_counter() - t1
    if progress:
        progress("evaluate", 1, 1)
    results = {
        "config": config_json(cfg),
        "split": {k: len(v) for k, v in asdict(prepared.split).items()},
        "snapshot": {
            "path": str(snapshot_path),
            "records": len(snapshot.records),
            "manifest": snapshot.manifest,
        },
        "training": training,
        "policies": policies,
        "timings": timings,
        "llm": llm_stats(llm),
        "provenance": provenance(prepared.split, prepared.tasks),
    }
    (out / "results.json").write_text(json.dumps(_jsonable(results), indent=2))
    return results


def train_all(cfg: ProtocolConfig, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Build (or reuse) and freeze memory, then train one selector per seed; writes
    ``training.json`` (snapshot path, best checkpoint per seed) into `cfg.out_dir`."""
    prepared = prepare(cfg)
    llm = make_protocol_llm(cfg, prepared)
    if cfg.store is None:
        snapshot_path = build_snapshot(
            cfg, prepared, progress=(lambda i, n: progress("build", i, n)) if progress else None, llm=llm
        )
    else:
        snapshot_path = Path(cfg.store)
    snapshot = load_snapshot(snapshot_path, prepared)
    training = train_layouts(cfg, snapshot, prepared, llm, progress)
    record = {
        "config": config_json(cfg),
        "snapshot": str(snapshot_path),
        "training": training,
        "llm": llm_stats(llm),
        "provenance": provenance(prepared.split, prepared.tasks),
    }
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(cfg.out_dir) / "training.json").write_text(json.dumps(_jsonable(record), indent=2))
    return record


def evaluate_all(cfg: ProtocolConfig, checkpoints: Checkpoints, *, write: bool = True) -> dict[str, Any]:
    """Evaluate every policy on T_eval against the frozen snapshot `cfg.store`; checkpoints
    (``{seed: path}`` for the paper layout or ``{layout: {seed: path}}``) are checked (existence,
    observation layout) before any episode runs. With `write`, the results go to
    ``<out_dir>/results.json``."""
    if cfg.store is None:
        raise ProtocolError("evaluation needs a frozen snapshot (--store)")
    prepared = prepare(cfg)
    snapshot = load_snapshot(Path(cfg.store), prepared)
    if "cf_memory" in cfg.policies and "cf_memory" not in cfg.custom_policies:
        from cm_gym.agents.masked_dqn import MaskedDQN
        from cm_gym.features import obs_dim

        for layout, paths in (checkpoints_by_layout(checkpoints) or {"paper": {}}).items():
            missing = [s for s in cfg.seeds if s not in paths or not Path(paths[s]).exists()]
            if missing:
                raise ProtocolError(f"no {layout!r}-layout selector checkpoint for seed(s) {missing}")
            for path in paths.values():  # raises on another observation layout
                if Path(path).is_dir():  # an RLlib module checkpoint
                    from cm_gym.ray_backend.rllib import load_rllib_policy

                    load_rllib_policy(path)
                else:
                    MaskedDQN.load(path, env=None, device="cpu", expected_obs_dim=obs_dim(layout))
    llm = make_protocol_llm(cfg, prepared)
    policies = evaluate_policies(cfg, snapshot, prepared, checkpoints, llm)
    results = {
        "config": config_json(cfg),
        "split": {k: len(v) for k, v in asdict(prepared.split).items()},
        "snapshot": {"path": str(cfg.store), "records": len(snapshot.records), "manifest": snapshot.manifest},
        "policies": policies,
        "llm": llm_stats(llm),
        "provenance": provenance(prepared.split, prepared.tasks),
    }
    if write:
        Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out_dir) / "results.json").write_text(json.dumps(_jsonable(results), indent=2))
    return results


def with_overrides(cfg: ProtocolConfig, **kw: Any) -> ProtocolConfig:
    """A copy of `cfg` with fields replaced (None values are ignored)."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})


def config_json(cfg: ProtocolConfig) -> dict[str, Any]:
    """The configuration as JSON data; your policies appear by name (module.qualname)."""
    data = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "custom_policies"}
    data["custom_policies"] = {name: _qualified(obj) for name, obj in cfg.custom_policies.items()}
    return _jsonable(data)


def _qualified(obj: Any) -> str:
    target = obj if callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(obj).__name__)}"


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return _jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj
