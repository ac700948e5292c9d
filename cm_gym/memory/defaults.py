"""The default frozen store of a benchmark, built once and cached (SPEC §7 build → freeze).

`default_snapshot("SQL")` loads the registered benchmark's tasks, splits them with
`cm_gym.splits.make_split(seed=12345)`, builds memory on the build split with the simulated LLM
and the domain's evaluator, and freezes it into ``cache_dir("stores")/<benchmark>-<settings
hash>.sqlite``. A second call (or a second process) reuses the verified snapshot; a file lock
serialises concurrent builders and the snapshot lands by atomic rename, so a reader never sees a
half-written file. An interrupted build resumes from its work store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.schema import SCHEMA_VERSION
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.memory.store import RecordStore
from cm_gym.paths import cache_dir

logger = logging.getLogger(__name__)

DEFAULT_SPLIT_SEED = 12345


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (fcntl) on `path`; a no-op where fcntl does not exist."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def settings_key(settings: dict[str, object]) -> str:
    """A short, stable hash of the build settings (part of the cached file name)."""
    blob = json.dumps(settings, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:12]


def default_snapshot(
    benchmark: str,
    *,
    seed: int = 0,
    agent: str = "react",
    n_build: int | None = None,
    config: ConstructionConfig | None = None,
    max_decisions: int = 3,
) -> Path:
    """Path of the benchmark's default frozen store (built on first use). `n_build` limits the
    build split to its first n tasks; the settings (and the task ids) determine the file name."""
    from cm_gym import __version__
    from cm_gym.llm.simulated import SimulatedLLM
    from cm_gym.registry import get_benchmark, get_domain
    from cm_gym.splits import make_split

    spec = get_benchmark(benchmark)
    tasks = list(spec.load_tasks())
    split = make_split(tasks, seed=DEFAULT_SPLIT_SEED, by_env=spec.split_by_env)
    build_ids = list(split.build[:n_build] if n_build is not None else split.build)
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
        "tasks": hashlib.sha256("\n".join(build_ids).encode()).hexdigest(),
    }
    folder = cache_dir("stores")
    target = folder / f"{spec.name}-{settings_key(settings)}.sqlite"
    with _file_lock(folder / f".{target.name}.lock"):
        if target.is_file():
            try:
                FrozenStore.open(target)
                return target
            except StoreError as exc:
                logger.warning("cached snapshot %s is unusable (%s); rebuilding", target, exc)
        domain = get_domain(spec.domain_name)
        work = folder / f".{target.stem}.building.sqlite"
        logger.info(
            "building the default %s store from %d tasks into %s", spec.name, len(build_tasks), target
        )
        with RecordStore(work, domain=domain.name, benchmark=spec.name, capacity=cfg.capacity) as store:
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
            )
            logger.info("default %s store:\n%s", spec.name, summary.format())
            store.freeze(target, overwrite=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(work) + suffix).unlink(missing_ok=True)
    return target
