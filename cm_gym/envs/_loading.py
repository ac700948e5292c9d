"""Resolving the env's constructor arguments: tasks, the frozen store and the LLM.

Kept apart from `selection.py` so the env module reads as the decision loop only. Everything here
reaches a domain through the registry, never by importing it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.registry import BenchmarkSpec
from cm_gym.llm.base import LLM

logger = logging.getLogger(__name__)

SPLIT_NAMES = ("build", "train", "validation", "eval", "all")
SPLIT_SEED = 12345
RETRIEVAL_MODES = ("matched", "random", "shuffled", "none")
TASK_ORDERS = ("random", "sequential")
RENDER_MODES = (None, "ansi", "rgb_array")
#: Keys `reset(options=...)` understands: ``task_id`` plays that task instead of drawing one.
RESET_OPTIONS = ("task_id",)
#: Weights for which 0 is meaningless: no reward for solving, or a zero token normaliser.
POSITIVE_WEIGHTS = ("solve", "token_scale")
DEFAULT_REWARD_WEIGHTS: Mapping[str, float] = {
    "solve": 1.0,  # paid once, at the final decision, when the task is solved
    "calls": 0.15,  # λ_w per evaluator call
    "failures": 0.25,  # λ_f per failed evaluated action
    "tokens": 0.02,  # λ_τ per τ0 tokens
    "token_scale": 1e4,  # τ0
}


class EnvConfigError(CmGymError):
    """A constructor argument of the selection env cannot be used (bad tasks, store, mode...)."""


class StoreNotFrozenError(EnvConfigError):
    """The env was given a writable store: it only reads frozen snapshots (paper C.3)."""


class StoreMismatchError(EnvConfigError):
    """The store was built for another domain, benchmark or embedder than the env's."""


def data_key(data: str | Path | None) -> str | None:
    """A data folder as the absolute path string the task cache is keyed by (None = default)."""
    return None if data is None else str(Path(data).expanduser().resolve())


@lru_cache(maxsize=16)
def _benchmark_tasks(name: str, data: str | None = None) -> tuple[Task, ...]:
    from cm_gym.domains.registry import get_benchmark

    tasks = tuple(get_benchmark(name).load(data))
    if not tasks:
        raise EnvConfigError(f"benchmark {name!r} has no tasks")
    return tasks


def _int_arg(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """`value` as an int in lo..hi, or one `EnvConfigError` (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise EnvConfigError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < lo or (hi is not None and value > hi):
        span = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
        raise EnvConfigError(f"{name} must be {span}, got {value}")
    return int(value)


def check_reward_weights(weights: Any) -> dict[str, float]:
    """The full weight mapping (defaults updated by `weights`), refusing unknown keys, non-numbers,
    NaN / inf, negative penalties, and a zero solve reward or token scale (meaningless)."""
    if weights is None:
        return dict(DEFAULT_REWARD_WEIGHTS)
    if not isinstance(weights, Mapping):
        raise EnvConfigError(f"reward_weights must be a dict, got {type(weights).__name__}")
    unknown = set(weights) - set(DEFAULT_REWARD_WEIGHTS)
    if unknown:
        raise EnvConfigError(
            f"unknown reward weight(s) {sorted(map(str, unknown))}; known: {sorted(DEFAULT_REWARD_WEIGHTS)}"
        )
    out = dict(DEFAULT_REWARD_WEIGHTS)
    for key, value in weights.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise EnvConfigError(f"reward weight {key!r} must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise EnvConfigError(f"reward weight {key!r} must be finite, got {value}")
        if key in POSITIVE_WEIGHTS and value <= 0:
            raise EnvConfigError(f"reward weight {key!r} must be > 0, got {value}")
        if value < 0:
            raise EnvConfigError(
                f"reward weight {key!r} must be >= 0 (it is subtracted as a penalty), got {value}"
            )
        out[key] = value
    return out


def check_arguments(
    *,
    retrieval: str,
    task_order: str,
    k: int,
    max_decisions: int,
    max_evaluator_calls: int | None,
    agent: str,
    render_mode: str | None,
    reward_weights: Mapping[str, float] | None,
    token_budget: int = 20_000,
) -> None:
    """Refuse unusable scalar arguments with one clear `EnvConfigError` before any work starts."""
    from cm_gym.agent import AGENT_KINDS
    from cm_gym.envs.features import N_SLOTS

    if retrieval not in RETRIEVAL_MODES:
        raise EnvConfigError(f"retrieval must be one of {RETRIEVAL_MODES}, got {retrieval!r}")
    if task_order not in TASK_ORDERS:
        raise EnvConfigError(f"task_order must be one of {TASK_ORDERS}, got {task_order!r}")
    _int_arg("k", k, 0, N_SLOTS)
    _int_arg("max_decisions", max_decisions, 1)
    if max_evaluator_calls is not None:
        _int_arg("max_evaluator_calls", max_evaluator_calls, 1)
    _int_arg("token_budget", token_budget, 1)
    if agent not in AGENT_KINDS:
        raise EnvConfigError(f"agent must be one of {AGENT_KINDS}, got {agent!r}")
    if render_mode not in RENDER_MODES:
        raise EnvConfigError(f"render_mode must be one of {RENDER_MODES}, got {render_mode!r}")
    check_reward_weights(reward_weights)


def check_reset_options(options: Any) -> dict[str, Any]:
    """`reset(options=...)`: None or a dict whose keys are among `RESET_OPTIONS`."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise EnvConfigError(
            f"reset(options=...) must be a dict such as {{'task_id': 'sqlgen-00012'}} or None, "
            f"got {type(options).__name__}"
        )
    unknown = sorted(str(k) for k in options if k not in RESET_OPTIONS)
    if unknown:
        raise EnvConfigError(f"unknown reset option(s) {unknown}; known: {list(RESET_OPTIONS)}")
    return dict(options)


def resolve_tasks(
    spec: BenchmarkSpec,
    tasks: str | Sequence[Task | str],
    data: str | Path | None = None,
    split_name: str | None = None,
) -> tuple[Task, ...]:
    """A side name of the split `split_name` (seed 12345; None: the benchmark's default split,
    `BenchmarkSpec.split_kind`), a list of Task, or a list of task ids; names and ids refer to the
    tasks loaded from `data` (the benchmark's default when None)."""
    if isinstance(tasks, str):
        if tasks not in SPLIT_NAMES:
            raise EnvConfigError(f"tasks={tasks!r}: use a split name {SPLIT_NAMES} or a list of tasks/ids")
        everything = _benchmark_tasks(spec.name, data_key(data))
        if tasks == "all":
            return everything
        from cm_gym.core.splits import make_split

        split = make_split(everything, seed=SPLIT_SEED, kind=spec.split_kind(split_name))
        wanted = set(getattr(split, tasks))
        chosen = tuple(t for t in everything if t.task_id in wanted)
        if not chosen:
            raise EnvConfigError(f"split {tasks!r} of benchmark {spec.name!r} is empty")
        return chosen
    items = list(tasks)
    if not items:
        raise EnvConfigError("tasks is an empty list")
    if all(isinstance(t, Task) for t in items):
        out = tuple(items)  # type: ignore[arg-type]
    elif all(isinstance(t, str) for t in items):
        by_id = {t.task_id: t for t in _benchmark_tasks(spec.name, data_key(data))}
        missing = [t for t in items if t not in by_id]
        if missing:
            raise EnvConfigError(f"unknown task id(s) for {spec.name}: {', '.join(map(str, missing[:5]))}")
        out = tuple(by_id[t] for t in items)  # type: ignore[index]
    else:
        raise EnvConfigError("tasks must be all Task objects or all task-id strings")
    ids = [t.task_id for t in out]
    if len(set(ids)) != len(ids):
        raise EnvConfigError("tasks contain duplicate task ids")
    return out


def resolve_store(
    store: Any,
    spec: BenchmarkSpec,
    domain_name: str,
    embedder_id: str,
    *,
    allow_cross_benchmark: bool,
    data: str | Path | None = None,
    split_name: str | None = None,
) -> Any:
    """A FrozenStore from a FrozenStore, a path or None (the benchmark's default snapshot, built
    from the tasks of `data` when given and keyed by their content, on the build side of the split
    `split_name`).

    Refused before any work starts: a writable RecordStore, a store of another domain, a store
    built for another benchmark (unless `allow_cross_benchmark`), a store with another embedder."""
    from cm_gym.memory.snapshot import FrozenStore

    if store is None:
        from cm_gym.memory.defaults import default_snapshot

        store = default_snapshot(spec.name, data=data_key(data), split_by=split_name)
    if isinstance(store, (str, Path)):
        from cm_gym.memory.schema import manifest_path, snapshot_reason

        path = Path(store)
        if path.is_file() and not manifest_path(path).is_file() and snapshot_reason(path):
            raise StoreNotFrozenError(
                f"{path} is a frozen snapshot whose manifest {manifest_path(path).name} is missing, so it "
                "cannot be verified: restore the manifest, or re-freeze it from its live store"
            )
        if path.is_file() and not manifest_path(path).is_file():
            what = _not_a_store(path)
            if what:
                raise StoreNotFrozenError(
                    f"{path} is not a record store ({what}): pass a frozen snapshot (its path or a "
                    "FrozenStore; `cm-gym memory freeze` makes one from a record store)"
                )
            raise StoreNotFrozenError(
                f"{path} is a writable record store, not a frozen snapshot: freeze it first "
                "(RecordStore.freeze(path) or `cm-gym memory freeze`)"
            )
        store = FrozenStore.open(path)
    if not isinstance(store, FrozenStore):
        raise StoreNotFrozenError(
            f"the env reads only frozen snapshots, got {type(store).__name__}: call store.freeze(path) "
            "and pass the FrozenStore (or its path)"
        )
    if store.domain != domain_name:
        raise StoreMismatchError(
            f"store {store.path} holds {store.domain!r} records, benchmark {spec.name!r} is domain {domain_name!r}"
        )
    if store.benchmark and store.benchmark != spec.name and not allow_cross_benchmark:
        raise StoreMismatchError(
            f"store {store.path} was built for benchmark {store.benchmark!r}, not {spec.name!r} "
            "(pass allow_cross_benchmark=True to study cross-benchmark transfer on purpose)"
        )
    if store.embedder_id != embedder_id:
        raise StoreMismatchError(
            f"store {store.path} was embedded with {store.embedder_id!r}, the env uses {embedder_id!r}"
        )
    return store


def client_limits(
    llm: Any,
    timeout: float | None,
    max_tokens: int | None,
    retries: int | None,
    concurrency: int | None,
) -> dict[str, Any]:
    """The env's ``llm_timeout`` / ``llm_max_tokens`` / ``llm_retries`` / ``llm_concurrency`` as
    validated `make_llm` keywords (unset ones omitted); they configure a spec-built LLM only."""
    from cm_gym.llm.errors import LLMError
    from cm_gym.llm.limits import check_limit

    given = {"timeout": timeout, "max_tokens": max_tokens, "retries": retries, "concurrency": concurrency}
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        try:
            out[name] = check_limit(name, value, f"llm_{name}")
        except LLMError as exc:
            raise EnvConfigError(str(exc)) from None
    if out and not isinstance(llm, str):
        raise EnvConfigError(
            "llm_timeout / llm_max_tokens / llm_retries / llm_concurrency configure an LLM built from a "
            "spec string (llm='openai'), not an LLM object: set them on the object"
        )
    return out


def resolve_llm(
    llm: LLM | str,
    seed: int,
    tasks: Sequence[Task],
    *,
    cache: str | Path | None = None,
    cache_mode: str = "rw",
    llm_kwargs: Mapping[str, Any] | None = None,
) -> LLM:
    """An LLM instance, or a `make_llm` spec ("simulated", "openai[:<model>]", "recorded:<system>")
    built with `llm_kwargs` (e.g. the simulator's ``revision_rates``), behind the response cache:
    always for an endpoint (`cache` or the default file), and for an instance, the simulator or
    the recorded LLM when `cache` is given (`cm_gym.llm.factory.make_llm`)."""
    from cm_gym.llm.factory import make_llm, with_cache

    extra = dict(llm_kwargs or {})
    if isinstance(llm, str):
        lookup = {t.task_id: t for t in tasks}
        if llm.startswith(("simulated", "recorded")):
            return make_llm(
                llm, seed=seed, task_lookup=lookup, cache_path=cache, cache_mode=cache_mode, **extra
            )
        return make_llm(llm, seed=seed, cache_path=cache, cache_mode=cache_mode, **extra)
    if extra:
        raise EnvConfigError("llm_kwargs only apply to an LLM built from a spec string, not to an LLM object")
    if not hasattr(llm, "complete"):
        raise EnvConfigError(
            f"llm must be an LLM (with .complete) or a spec string, got {type(llm).__name__}"
        )
    return llm if cache is None else with_cache(llm, cache, cache_mode)


def _not_a_store(path: Path) -> str:
    """Why the file at `path` is not a cm_gym record store at all ("" when it is one), read
    without writing a byte: not SQLite, or SQLite without the store's tables."""
    import sqlite3

    try:
        with open(path, "rb") as fh:
            header = fh.read(16)
    except OSError as exc:
        return f"it cannot be read: {exc}"
    if header != b"SQLite format 3\x00":
        return "not an SQLite file"
    try:
        conn = sqlite3.connect(f"file:{path.resolve().as_posix()}?mode=ro&immutable=1", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"an unreadable SQLite file: {exc}"
    if {"meta", "records"} <= tables:
        return ""
    if not tables and Path(f"{path}-wal").exists():
        return ""  # a live store in WAL mode keeps its tables in the log until a checkpoint
    return "an SQLite file without a record store's tables"
