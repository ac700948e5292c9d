"""Preparing a protocol run: the checked split (Eq. 14), the run's one LLM, building and freezing
memory on T_build, opening a snapshot (checked against the split) and the selector env over it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cm_gym.core.types import Split, SplitOverlapError, Task
from cm_gym.domains.registry import BenchmarkSpec, get_benchmark, get_domain
from cm_gym.protocol.config import ProtocolConfig, ProtocolError, jsonable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """The benchmark, its tasks by id and the checked split of one run. `excluded` lists, per
    side of the split, the tasks left out because the recorded LLM has no output for them
    (``llm="recorded:<system>"``; None for any other LLM)."""

    spec: BenchmarkSpec
    tasks: dict[str, Task]
    split: Split
    excluded: dict[str, list[str]] | None = None
    split_kind: str = ""


#: the sides of the split a protocol step works on
SIDES = ("build", "train", "eval")


def prepare(cfg: ProtocolConfig, need: Sequence[str] = ()) -> Prepared:
    """Load the benchmark's tasks and make the (capped) split; refuse any overlap (Eq. 14). With
    the recorded LLM, each side of the split keeps only the tasks it has a published output for
    (the split itself is the one any other LLM gets), before the caps. A side named in `need`
    that ends up empty is one `ProtocolError` saying why (issue 33: not an empty store, rc 0)."""
    cfg.validate()
    spec = get_benchmark(cfg.benchmark)
    tasks = spec.load(cfg.data)
    kind = spec.split_kind(cfg.split_by)
    split = spec.make_split(tasks, seed=cfg.split_seed, split=kind)
    excluded = None
    if cfg.llm.startswith("recorded:"):
        split, excluded = _recorded_only(cfg.llm, split, tasks)
    train = split.train[: cfg.n_train] if cfg.n_train else split.train
    validation = train[: max(1, int(round(len(train) * cfg.validation_fraction)))]
    split = Split(
        build=split.build[: cfg.n_build] if cfg.n_build else split.build,
        train=train,
        validation=validation,
        eval=split.eval[: cfg.n_eval] if cfg.n_eval else split.eval,
    )
    split.check()
    require_tasks(cfg, split, need, excluded, len(tasks))
    return Prepared(spec, {t.task_id: t for t in tasks}, split, excluded, kind)


def split_summary(cfg: ProtocolConfig, prepared: Prepared) -> dict[str, Any]:
    """What ``results.json`` says of the split: the side sizes (as before), the kind, its label
    and its seed (`cm_gym.core.splits`: "sampled" = the paper's App. D.2 split, "environments" =
    the "new environment" condition), so two result files are never compared across splits
    unknowingly."""
    from dataclasses import asdict

    from cm_gym.core.splits import SPLIT_LABELS

    out: dict[str, Any] = {k: len(v) for k, v in asdict(prepared.split).items()}
    kind = prepared.split_kind or prepared.spec.split_kind(cfg.split_by)
    out.update(kind=kind, label=SPLIT_LABELS[kind], seed=cfg.split_seed)
    return out


def require_tasks(
    cfg: ProtocolConfig,
    split: Split,
    need: Sequence[str],
    excluded: dict[str, list[str]] | None,
    n_tasks: int,
) -> None:
    """Refuse a run whose `need`-ed sides of `split` are empty, naming the cause: the recorded
    system covers none of them, the benchmark has no tasks, or the split (seed, caps) leaves none."""
    empty = [side for side in need if not getattr(split, side)]
    if not empty:
        return
    lost = sum(len((excluded or {}).get(side, [])) for side in empty)
    if lost:
        why = f"{cfg.llm} has a published output for none of them ({lost} task(s) left out)"
    elif n_tasks == 0:
        why = "the benchmark has no tasks"
    else:
        why = f"the split of its {n_tasks} task(s) (split seed {cfg.split_seed}, caps) leaves none there"
    raise ProtocolError(f"no {' / '.join(empty)} tasks for {cfg.benchmark}: {why}; nothing to do")


def _recorded_only(spec: str, split: Split, tasks: Sequence[Task]) -> tuple[Split, dict[str, list[str]]]:
    """`split` restricted to the tasks the recorded system answers, and what each side lost."""
    from cm_gym.llm.recorded import recorded_task_ids

    covered = set(recorded_task_ids(spec, tasks)[0])
    if not covered:
        raise ProtocolError(f"{spec} has no published output for any task of this benchmark")
    sides = {name: getattr(split, name) for name in ("build", "train", "eval")}
    excluded = {name: [i for i in ids if i not in covered] for name, ids in sides.items()}
    if any(excluded.values()):
        logger.warning(
            "%s: left out %s task(s) without a published output", spec,
            ", ".join(f"{len(v)} {k}" for k, v in excluded.items() if v),
        )  # fmt: skip
    kept = {name: tuple(i for i in ids if i in covered) for name, ids in sides.items()}
    return Split(validation=(), **kept), excluded


def recorded_summary(cfg: ProtocolConfig, prepared: Prepared, llm: Any = None) -> dict[str, Any] | None:
    """What ``results.json`` records of a recorded-LLM run (its replies are under ``llm``): the
    system, whether later drafts climb its cascade (and the ladder they climb; just the system when
    it is retried as itself), and the tasks left out per split side (counts and ids)."""
    from cm_gym.llm.recorded import split_cascade

    if prepared.excluded is None:
        return None
    inner = llm
    for _ in range(8):  # the RecordedLLM under any cache / timing wrappers
        if inner is None or hasattr(inner, "ladder"):
            break
        inner = getattr(inner, "inner", None)
    system, cascade = split_cascade(cfg.llm.split(":", 1)[1])
    return {
        "system": system,
        "cascade": cascade,
        "ladder": list(getattr(inner, "ladder", ()) or ()),
        "excluded": {k: len(v) for k, v in prepared.excluded.items()},
        "excluded_ids": prepared.excluded,
    }


def snapshot_summary(path: Path | str, snapshot: Any) -> dict[str, Any]:
    """What ``results.json`` says of the store: its path, record count, manifest, and how many
    records have each provenance of a⁻ and of a⁺ (`cm_gym.memory.record.PROVENANCES`)."""
    from collections import Counter

    records = list(snapshot.records)
    return {
        "path": str(path),
        "records": len(records),
        "manifest": snapshot.manifest,
        "provenance": {
            "a_minus": dict(Counter(r.a_minus_provenance for r in records)),
            "a_plus": dict(Counter(r.a_plus_provenance for r in records)),
        },
    }


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


def shares_default_store(cfg: ProtocolConfig) -> bool:
    """Whether the run's memory is a default store (`cm_gym.memory.defaults.default_snapshot`):
    built by the plain simulator, uncached and without fitted revision rates (the one LLM a
    default store is built with), on the default store's split seed. Its build tasks and other
    settings (agent, decisions, retention, a⁻ admission, LLM seed, data, split) are part of the
    default store's key, so a run that shares it reuses what ``gym.make`` built and the reverse."""
    from cm_gym.memory.defaults import DEFAULT_SPLIT_SEED

    return (
        cfg.llm in ("simulated", "simulated:default")
        and cfg.llm_cache is None
        and cfg.revision_rates is None
        and cfg.split_seed == DEFAULT_SPLIT_SEED
    )


def _default_store(
    cfg: ProtocolConfig, prepared: Prepared, progress: Callable[[int, int], None] | None
) -> Path:
    """`default_snapshot` of the run's build tasks and settings (built now if not cached)."""
    from cm_gym.memory.construction import ConstructionConfig
    from cm_gym.memory.defaults import default_snapshot

    return default_snapshot(
        prepared.spec.name,
        seed=cfg.llm_seed,
        agent=cfg.agent,
        n_build=len(prepared.split.build),
        config=ConstructionConfig(retention=cfg.retention, admit_a_minus=cfg.admit_a_minus),
        max_decisions=cfg.max_decisions,
        data=cfg.data,
        split_by=cfg.split_by,
        progress=progress,
    )


def _shared_snapshot(
    cfg: ProtocolConfig, prepared: Prepared, mem_dir: Path, progress: Callable[[int, int], None] | None
) -> Path | None:
    """The default store of the run's build tasks and settings (built into ``CM_GYM_CACHE`` if it
    is not there yet), copied to ``<mem_dir>/snapshot.sqlite`` (where a run's snapshot always is)
    with ``build_summary.json`` from its counters. None when that store covers other tasks (then
    the run builds its own, as it does when a read-only cache lacks that store)."""
    import sqlite3
    from contextlib import closing

    from cm_gym.core import boundedjson
    from cm_gym.core.paths import CacheError
    from cm_gym.memory.snapshot import copy_snapshot
    from cm_gym.memory.summary import BuildSummary

    tasks = list(prepared.tasks.values())
    full = prepared.spec.make_split(tasks, seed=cfg.split_seed, split=prepared.split_kind)
    if list(full.build[: len(prepared.split.build)]) != list(prepared.split.build):
        return None  # not the head of the default split's build side (a hand-made split)
    try:
        cached = _default_store(cfg, prepared, progress)
    except CacheError as exc:  # a read-only cache without this store: build in the run folder
        logger.info("not sharing the default %s store (%s)", prepared.spec.name, exc)
        return None
    # the run folder keeps the snapshot (a verified copy) and build_summary.json (from the
    # build's counters, kept in the snapshot)
    snapshot = copy_snapshot(cached, mem_dir / "snapshot.sqlite")
    if set(snapshot.processed_task_ids) != set(prepared.split.build):
        return None  # not this run's build tasks: never guess, build them (over the copy)
    with closing(sqlite3.connect(f"file:{snapshot.path}?mode=ro", uri=True)) as db:
        kept = db.execute("SELECT value FROM meta WHERE key = 'build_summary'").fetchone()
        counters = dict(db.execute("SELECT name, value FROM counters"))
    # the build's own summary (kept in the snapshot by `default_snapshot`), else its counters
    built = (
        boundedjson.loads(kept[0], what="the build summary", expect=dict)
        if kept
        else {**jsonable(BuildSummary.from_counters(counters)), "records": len(snapshot)}
    )
    summary = {**built, "default_store": str(cached)}
    (mem_dir / "build_summary.json").write_text(json.dumps(summary, indent=2))
    logger.info("memory: the default %s store %s (shared with gym.make)", prepared.spec.name, cached)
    return Path(snapshot.path)


def build_snapshot(
    cfg: ProtocolConfig,
    prepared: Prepared,
    progress: Callable[[int, int], None] | None = None,
    llm: Any = None,
) -> Path:
    """Construct memory on T_build (Algorithm 1, lines 3–14) and freeze it into a snapshot. With
    the plain simulator (`shares_default_store`) that memory is the default store of the same
    build tasks and settings, shared with ``gym.make`` through ``CM_GYM_CACHE``: built there once,
    then loaded by either."""
    from cm_gym.agent.prefetch import prefetch_first_drafts
    from cm_gym.memory.construction import ConstructionConfig, build_memory
    from cm_gym.memory.store import RecordStore

    domain = get_domain(prepared.spec.domain_name)
    mem_dir = Path(cfg.out_dir) / "memory"
    mem_dir.mkdir(parents=True, exist_ok=True)
    if shares_default_store(cfg):
        shared = _shared_snapshot(cfg, prepared, mem_dir, progress)
        if shared is not None:
            return shared
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
            ConstructionConfig(retention=cfg.retention, admit_a_minus=cfg.admit_a_minus),
            agent_kind=cfg.agent,
            max_decisions=cfg.max_decisions,
            progress=progress,
        )
        store.freeze(snapshot_path, overwrite=True)
        from cm_gym.memory.defaults import warn_if_nearly_empty

        warn_if_nearly_empty(f"the memory of {prepared.spec.name}", len(store), len(build_tasks))
        payload = jsonable(summary)
        if summary.skipped:  # a resumed build: the whole build's counts, this session's beside them
            from cm_gym.memory.summary import BuildSummary

            total = BuildSummary.from_counters(store.counters)
            total.skipped, total.records, total.budget_exhausted = (
                0,
                summary.records,
                summary.budget_exhausted,
            )
            payload = {**jsonable(total), "resumed": True, "this_session": payload}
    (mem_dir / "build_summary.json").write_text(json.dumps(payload, indent=2))
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
