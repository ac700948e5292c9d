"""The default frozen store of a benchmark, built once and cached (SPEC §7 build → freeze).

`default_snapshot("SQL")` loads the registered benchmark's tasks, splits them with
`cm_gym.core.splits.make_split(seed=12345)`, builds memory on the build split with the simulated LLM
and the domain's evaluator, and freezes it into ``cache_dir("stores")/<benchmark>-<key>.sqlite``.

The key hashes everything the records depend on: the build settings, the build tasks' *content*
(`cm_gym.core.types.task_digest`: an edited gold query or prompt is a new key), the domain's version
(`Domain.code_version()`: declared, or a hash of the domain package's files, so an edited plugin
``distil`` is a new key), the code that builds records (`cm_gym.memory`, the agent loop, the
simulated LLM), the embedder and the schema. Building announces itself in one line when it starts
and one when it is done (INFO: an ordinary build is no warning) beside a progress bar on stderr
(``CM_GYM_PROGRESS=0`` hides them). `cm-gym run` / `train` with the plain simulator share this
cache (`cm_gym.protocol.stores.shares_default_store`): the same build tasks and settings are one
file, whichever of ``gym.make`` and the protocol comes first.

Reuse needs no write access: an existing, verified snapshot is returned without taking a lock, so
a read-only ``CM_GYM_CACHE`` works for everything that only reads. Building takes a file lock, so
concurrent builders (threads or processes) wait for the first one; the snapshot lands by atomic
rename, so a reader never sees a half-written file. An interrupted build resumes from its work
store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cm_gym.core.paths import CacheError, cache_dir
from cm_gym.core.quick import DEFAULT_STORE_N_BUILD, quick_mode, say
from cm_gym.core.types import Task, task_digest
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.locking import FileLock
from cm_gym.memory.schema import SCHEMA_VERSION
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.memory.store import RecordStore

if TYPE_CHECKING:
    from cm_gym.domains.base import Domain
    from cm_gym.domains.registry import BenchmarkSpec

logger = logging.getLogger(__name__)

DEFAULT_SPLIT_SEED = 12345
#: A store with fewer records is "nearly empty": with k = 3 retrieval and applicability
#: conditions, most decisions then see no record at all, and a selector has little to learn. The
#: same threshold as ``cm-gym check-domain --strict`` (`cm_gym.cli.check_domain.MIN_DEFAULT_RECORDS`).
MIN_USEFUL_RECORDS = 10
#: The docs page of each built-in domain (by `Domain.name`), named by the nearly-empty warning of a
#: default store: its "Default store" section says why that store is small and what to do.
DOCS_PAGES = {
    "code": "docs/domains/code.md",
    "humaneval": "docs/domains/code.md",
    "humaneval_synth": "docs/domains/code.md",
    "dafny": "docs/domains/dafny.md",
    "math": "docs/domains/math.md",
    "sat": "docs/domains/sat.md",
    "smt": "docs/domains/smt.md",
    "sql": "docs/domains/sql.md",
}
#: default stores already warned about in this process (one line per store, not one per gym.make)
_WARNED: set[str] = set()
STORES = "stores"
#: Modules (relative to the cm_gym package) whose code shapes the records of a default store.
_CORE_SOURCES = (
    "memory",
    "domains/conditions.py",
    "agent/__init__.py",
    "llm/simulated.py",
    "llm/prompts.py",
    "llm/parsers.py",
)


def settings_key(settings: dict[str, object]) -> str:
    """A short, stable hash of the build settings (part of the cached file name)."""
    blob = json.dumps(settings, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def core_version() -> str:
    """A hash of the cm_gym sources that build records (construction, admission, the agent loop,
    the simulated LLM and its prompts)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for name in _CORE_SOURCES:
        path = root / name
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if file.is_file():
                h.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
    return h.hexdigest()[:16]


def _progress_bar(benchmark: str, total: int) -> Any:
    """A progress bar on stderr (lines when piped), or None when ``CM_GYM_PROGRESS=0``."""
    from cm_gym.core.progress import progress_bar, progress_enabled

    if not progress_enabled():
        return None
    return progress_bar(total, f"default {benchmark} store", "task", file=sys.stderr)


def _announce(message: str) -> None:
    """An ordinary first build's start and end: INFO, not WARNING (nothing is wrong). Shown on
    stderr beside its progress bar unless ``CM_GYM_PROGRESS=0`` — as a plain line where logging
    would hide INFO (a bare ``gym.make``, a command without ``-v``), through logging where it shows
    INFO (never twice). Real problems (an unusable cached store, too few records) stay WARNINGs."""
    from cm_gym.core.progress import progress_enabled

    logger.info(message)
    if progress_enabled() and not logger.isEnabledFor(logging.INFO):
        print(message, file=sys.stderr, flush=True)


def warn_if_nearly_empty(
    what: str, n_records: int, n_tasks: int, *, docs: str | None = None, benchmark: str | None = None
) -> str | None:
    """Log (WARNING) and return a one-line warning when a built store holds fewer than
    `MIN_USEFUL_RECORDS` records; None otherwise. `docs` (a default store's docs page) and
    `benchmark` turn the advice into the page that says why and the command that builds more."""
    if n_records >= MIN_USEFUL_RECORDS:
        return None
    head = (
        f"{what} holds only {n_records} record(s) from {n_tasks} build task(s) (fewer than "
        f"{MIN_USEFUL_RECORDS}): "
    )
    if docs is not None:
        build = f"`cm-gym build --benchmark {benchmark} --out FILE`" if benchmark else "`cm-gym build`"
        offer = "every decision offers only skip" if n_records == 0 else "it has few records to offer"
        message = head + (
            f"{offer}, so a selector trained on it has little or nothing to learn. Why, and how to "
            f"build a larger store ({build}, then gym.make(..., store=FILE)): {docs}, section "
            '"Default store".'
        )
    else:
        message = head + (
            "memory will rarely be retrieved. Build on more tasks, or check the domain's error model, "
            "edit operators and distil (what admission refused is in the summary)."
        )
    logger.warning(message)
    return message


def _warn_default_store(spec: BenchmarkSpec, target: Path, n_records: int, n_tasks: int) -> None:
    """The nearly-empty warning of a default store, once per store per process (a vector env's
    or a sweep's repeated gym.make does not repeat it), naming the domain's docs page."""
    if str(target) in _WARNED:
        return
    if warn_if_nearly_empty(
        f"the default {spec.name} store",
        n_records,
        n_tasks,
        docs=DOCS_PAGES.get(spec.domain_name, f"the {spec.name} benchmark's docs"),
        benchmark=spec.name,
    ):
        _WARNED.add(str(target))


def default_snapshot(
    benchmark: str,
    *,
    seed: int = 0,
    agent: str = "react",
    n_build: int | None = None,
    config: ConstructionConfig | None = None,
    max_decisions: int = 3,
    data: str | Path | None = None,
    split_by: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Path of the benchmark's default frozen store (built on first use). `n_build` limits the
    build split to its first n tasks (default: the benchmark's `default_n_build`, else all; at
    most `cm_gym.core.quick.DEFAULT_STORE_N_BUILD` under ``CM_GYM_QUICK=1``); the
    settings (and the tasks' content) determine the file name. `data` is a data folder for the
    benchmark (the data-root contract of `cm_gym.domains.registry`); `split_by` names the split whose
    build side it is built on (None: the benchmark's default, `BenchmarkSpec.split_kind`).
    `progress(done, total)`, when given, reports a build instead of the stderr progress bar (the
    protocol's phase bar, when `cm-gym run` shares this store: `cm_gym.protocol.stores`)."""
    from cm_gym.core.splits import make_split
    from cm_gym.core.version import __version__
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.llm.simulated import SIMULATOR_VERSION

    spec = get_benchmark(benchmark)
    if n_build is None:
        n_build = spec.default_n_build
        if quick_mode():  # CM_GYM_QUICK=1: a smaller store (another cached file, `cm_gym.core.quick`)
            say(f"the default {spec.name} store")
            n_build = min(n_build or DEFAULT_STORE_N_BUILD, DEFAULT_STORE_N_BUILD)
    domain = get_domain(spec.domain_name)
    tasks = spec.load(data)
    sides = make_split(tasks, seed=DEFAULT_SPLIT_SEED, kind=spec.split_kind(split_by))
    build_ids = list(sides.build[:n_build] if n_build is not None else sides.build)
    by_id = {t.task_id: t for t in tasks}
    build_tasks = [by_id[i] for i in build_ids]
    cfg = config or ConstructionConfig()
    settings: dict[str, object] = {
        "benchmark": spec.name,
        "seed": seed,
        "agent": agent,
        "max_decisions": max_decisions,
        "config": asdict(cfg),
        "embedder": Embedder().embedder_id,
        "schema": SCHEMA_VERSION,
        "cm_gym": __version__,
        "core": core_version(),
        "simulator": SIMULATOR_VERSION,
        "domain": domain.name,
        "domain_version": domain.code_version(),
        "tasks": task_digest(build_tasks),
        "n_tasks": len(build_tasks),
    }
    folder = cache_dir(STORES)
    target = folder / f"{spec.name}-{settings_key(settings)}.sqlite"
    if target.is_file():  # the read-only path: no lock, no write
        try:
            cached = FrozenStore.open(target)
            _warn_default_store(spec, target, len(cached), len(build_tasks))
            return target
        except StoreError as exc:
            logger.warning("cached snapshot %s is unusable (%s); rebuilding", target, exc)
    try:
        lock = FileLock(folder / f".{target.name}.lock", what=f"the default {spec.name} store")
        lock.acquire(timeout=None)
    except StoreError as exc:
        raise CacheError(
            f"the default {spec.name} store is not in the cache and cannot be built there ({exc}); "
            "set CM_GYM_CACHE to a writable folder, or pass store= a frozen snapshot"
        ) from None
    try:
        if target.is_file():  # another process built it while we waited
            try:
                cached = FrozenStore.open(target)
                _warn_default_store(spec, target, len(cached), len(build_tasks))
                return target
            except StoreError as exc:
                logger.warning("cached snapshot %s is unusable (%s); rebuilding", target, exc)
        _build(
            spec,
            domain,
            build_tasks,
            settings,
            target,
            cfg,
            seed=seed,
            agent=agent,
            max_decisions=max_decisions,
            report=progress,
        )
    finally:
        lock.release()
    return target


def _build(
    spec: BenchmarkSpec,
    domain: Domain,
    build_tasks: list[Task],
    settings: dict[str, object],
    target: Path,
    cfg: ConstructionConfig,
    *,
    seed: int,
    agent: str,
    max_decisions: int,
    report: Callable[[int, int], None] | None = None,
) -> None:
    from cm_gym.llm.simulated import SimulatedLLM

    name = spec.name
    work = target.with_name(f".{target.stem}.building.sqlite")
    _announce(
        f"building the default {name} store from {len(build_tasks)} tasks (once; cached as {target}, "
        "set CM_GYM_CACHE to move it)"
    )
    started = time.perf_counter()
    bar = _progress_bar(name, len(build_tasks)) if report is None else None

    def progress(done: int, total: int) -> None:
        if report is not None:
            report(done, total)
        if bar is not None:
            bar.n = done
            bar.refresh()

    try:
        with RecordStore(work, domain=domain.name, benchmark=name, capacity=cfg.capacity) as store:
            store.set_meta("build_settings", json.dumps(settings, sort_keys=True, default=str))
            summary = build_memory(
                domain,
                build_tasks,
                store,
                SimulatedLLM(seed=seed),
                domain.make_evaluator(),
                cfg,
                agent_kind=agent,
                max_decisions=max_decisions,
                progress=progress,
            )
            logger.info("default %s store:\n%s", name, summary.format())
            # kept in the snapshot: a protocol run that shares this store reports it as its build
            store.set_meta("build_summary", json.dumps(asdict(summary), default=str))
            store.freeze(target, overwrite=True)
            n_records = len(store)
    finally:
        if bar is not None:
            bar.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(work) + suffix).unlink(missing_ok=True)
    work.with_name(f".{work.name}.lock").unlink(missing_ok=True)
    _announce(f"default {name} store ready: {n_records} records in {time.perf_counter() - started:.0f} s")
    _warn_default_store(spec, target, n_records, len(build_tasks))
