"""The protocol's configuration: its policy and learner names, table labels, `ProtocolConfig` (the
paper's defaults, validated before any work) and the JSON form of a configuration and results."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core.types import CmGymError

POLICIES = ("none", "top1", "random", "cf_memory", "oracle")
#: the field's learned selectors (issue 34; `cm_gym.agents.zoo.LEARNED`), trained on T_train with
#: the store frozen when asked for (``--policies memrl ...``, ``cm-gym compare``); not run by default
LEARNED_POLICIES = ("memrl", "memq", "linucb", "thompson", "memento-clf")
#: every built-in policy name
KNOWN_POLICIES = POLICIES + LEARNED_POLICIES
#: selector learners: SB3 (built in) or RLlib (the optional ``ray`` extra)
ALGOS = ("masked-dqn", "rllib-ppo", "rllib-dqn")
POLICY_LABELS = {
    "none": "None (always skip)",
    "top1": "Top-1 (always use)",
    "random": "Random valid",
    "cf_memory": "CF Memory (masked DQN)",
    "cf_memory_extended": "CF Memory (masked DQN, extended z_t)",
    "oracle": "Oracle (peeks; upper bound)",
    "memrl": "MemRL (per-record Q)",
    "memq": "MemQ (Q + provenance credit)",
    "linucb": "LinUCB (z_t per slot)",
    "thompson": "Thompson sampling (z_t per slot)",
    "memento-clf": "Memento classifier (pairwise CE)",
}
#: Baselines every policy is compared with, by a paired bootstrap over tasks (SPEC §8).
CI_BASELINES = ("random", "top1")


#: The "none" row's label when the LLM is a recorded cascade (``recorded:<system>+cascade``): its
#: later drafts are stronger published systems, so it is a cascade, never "None".
CASCADE_LABEL = "Cascade (always skip; later drafts from stronger published systems)"


def policy_label(key: str, algo: str = "masked-dqn", llm: str = "") -> str:
    """The table label of a results key; a selector trained by RLlib says so instead of "DQN"; the
    memory-free row of a recorded cascade (`llm` ``recorded:<system>+cascade``) is "Cascade"."""
    if key == "none" and llm.startswith("recorded:"):
        from cm_gym.llm.recorded import is_cascade

        if is_cascade(llm):
            return CASCADE_LABEL
    label = POLICY_LABELS.get(key, key)
    if algo != "masked-dqn" and key.startswith("cf_memory"):
        label = label.replace("masked DQN", learner_label(algo))
    return label


def learner_label(algo: str = "masked-dqn") -> str:
    """The selector learner as tables and figures name it: "masked DQN" (SB3, the default) or
    "masked RLlib PPO" / "masked RLlib DQN" for ``--algo rllib-*``."""
    if algo == "masked-dqn":
        return "masked DQN"
    return f"masked RLlib {algo.removeprefix('rllib-').upper()}"


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
    #: LLM calls in flight at most where calls are independent (real LLMs); None: from
    #: CM_GYM_LLM_CONCURRENCY, else 8 (resolved when the configuration is made)
    concurrency: int | None = None
    #: client limits of a real endpoint (`cm_gym.llm.limits`); None: CM_GYM_LLM_*, else defaults
    llm_timeout: float | None = None
    llm_max_tokens: int | None = None
    llm_retries: int | None = None
    revision_rates: Path | None = None  # the simulator's revision rates (`cm-gym calibrate`)
    split_seed: int = 12345
    #: which split (`cm_gym.core.splits.SPLIT_NAMES`: "tasks" = App. D.2, "databases" = environments
    #: apart); None: the benchmark's default (`BenchmarkSpec.split_kind`)
    split_by: str | None = None
    max_decisions: int = 3
    k: int = 3
    use_conditions: bool = True
    retrieval: str = "matched"
    retention: str = "utility"
    #: which a⁻ construction admits (`cm_gym.memory.provenance`): "auto" (only real model text when
    #: the drafts are real), "real" or "any"
    admit_a_minus: str = "auto"
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
    #: your policies, name -> policy or factory(env, seed) (`cm_gym.protocol.evaluation`); their names
    #: must also be in `policies` to be evaluated.
    custom_policies: dict[str, Any] = field(default_factory=dict)
    #: the selector's learner: SB3's masked DQN, or RLlib PPO / DQN (`cm_gym.backends.ray.rllib`)
    algo: str = "masked-dqn"
    env_runners: int = 1  # RLlib env-runner processes collecting decisions
    ray_address: str | None = None  # RLlib on an existing Ray cluster (None: a local instance)
    #: rotate the split over these seeds (one whole run each, pooled; `cm_gym.protocol.rotation`);
    #: empty: the one split of `split_seed`
    split_seeds: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        from cm_gym.llm.limits import limit

        self.concurrency = int(limit("concurrency", self.concurrency))

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
        if any(
            isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in self.split_seeds
        ):
            raise ProtocolError(f"split_seeds must be non-negative integers, got {self.split_seeds!r}")
        if len(set(self.split_seeds)) != len(self.split_seeds):
            raise ProtocolError(f"split_seeds must be distinct, got {self.split_seeds!r}")
        if self.split_seeds and self.store is not None:
            raise ProtocolError(
                "--split-seeds builds memory on each split's T_build; a given --store belongs to one split"
            )
        if self.admit_a_minus not in ("auto", "real", "any"):
            raise ProtocolError(f"admit_a_minus must be auto, real or any, got {self.admit_a_minus!r}")
        if self.split_by is not None:
            from cm_gym.core.splits import split_kind

            try:
                split_kind(self.split_by)
            except ValueError as exc:
                raise ProtocolError(str(exc)) from None
        if self.k > 4:
            raise ProtocolError(f"k must be in 0..4 (the selector has 4 slots), got {self.k}")
        unknown = [p for p in self.policies if p not in KNOWN_POLICIES and p not in self.custom_policies]
        if unknown:
            raise ProtocolError(f"unknown policy {unknown[0]!r}; built-in: {', '.join(KNOWN_POLICIES)}")
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
        from cm_gym.envs.features import OBS_LAYOUTS

        if not self.obs_layouts or any(layout not in OBS_LAYOUTS for layout in self.obs_layouts):
            raise ProtocolError(
                f"obs_layouts must be a non-empty subset of {OBS_LAYOUTS}, got {self.obs_layouts}"
            )
        if not 0.0 < self.validation_fraction <= 1.0:
            raise ProtocolError(f"validation_fraction must be in (0, 1], got {self.validation_fraction}")
        if self.revision_rates is not None and not self.llm.startswith(("simulated", "recorded:")):
            raise ProtocolError(
                f"--revision-rates configures the simulated LLM (or the recorded LLM's simulated "
                f"revisions), not {self.llm!r}"
            )
        from cm_gym.llm.errors import LLMError
        from cm_gym.llm.limits import check_limit

        for name, value in self.client_limits().items():
            try:
                check_limit(name, value)
            except LLMError as exc:
                raise ProtocolError(str(exc)) from None

    def client_limits(self) -> dict[str, Any]:
        """The client limits given for a real endpoint (`make_llm` keywords; unset ones omitted)."""
        given = {"timeout": self.llm_timeout, "max_tokens": self.llm_max_tokens, "retries": self.llm_retries}
        return {k: v for k, v in given.items() if v is not None}

    def llm_kwargs(self) -> dict[str, Any]:
        """Extra `make_llm` arguments: the simulator's revision-rates file, when one is given, and
        the client limits that were set."""
        extra: dict[str, Any] = self.client_limits()
        if self.revision_rates is not None:
            extra["revision_rates"] = str(self.revision_rates)
        return extra

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
            **({"split_by": self.split_by} if self.split_by is not None else {}),
            **({"llm_kwargs": self.llm_kwargs()} if self.llm_kwargs() else {}),
            **self.env_kwargs,
        }


def with_overrides(cfg: ProtocolConfig, **kw: Any) -> ProtocolConfig:
    """A copy of `cfg` with fields replaced (None values are ignored)."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})


def config_json(cfg: ProtocolConfig) -> dict[str, Any]:
    """The configuration as JSON data; your policies appear by name (module.qualname)."""
    data = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "custom_policies"}
    data["custom_policies"] = {name: _qualified(obj) for name, obj in cfg.custom_policies.items()}
    return jsonable(data)


def _qualified(obj: Any) -> str:
    target = obj if callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(obj).__name__)}"


def jsonable(obj: Any) -> Any:
    """`obj` as JSON data: dataclasses as dicts, paths as strings, NumPy scalars as Python ones and
    non-finite floats as null."""
    if hasattr(obj, "__dataclass_fields__"):
        return jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj
