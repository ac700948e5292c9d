"""Parallel construction (`cm_gym.memory.parallel`, issue 16.3): speculation workers run tasks
ahead against store snapshots, the single writer replays their calls in task order, and the store
is byte-identical to the serial build with the same seed, checkpoints included."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

pytest.importorskip("cm_gym.domains.sql")

from cm_gym.core.splits import make_split  # noqa: E402
from cm_gym.domains.registry import get_benchmark, get_domain  # noqa: E402
from cm_gym.llm.simulated import SimulatedLLM  # noqa: E402
from cm_gym.memory.construction import ConstructionConfig, build_memory  # noqa: E402
from cm_gym.memory.parallel import ParallelStats, build_memory_parallel  # noqa: E402
from cm_gym.memory.store import RecordStore  # noqa: E402


@pytest.mark.slow
def test_parallel_build_is_byte_identical_to_the_serial_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the store's one wall-clock field
    spec = get_benchmark("SQL")
    domain = get_domain(spec.domain_name)
    tasks = list(spec.load_tasks())
    split = make_split(tasks, seed=12345, by_env=spec.split_by_env)
    by_id = {t.task_id: t for t in tasks}
    build = [by_id[i] for i in split.build[:40]]
    make_llm = functools.partial(SimulatedLLM, seed=0)
    cfg = ConstructionConfig()

    def open_store(name: str) -> RecordStore:
        return RecordStore(tmp_path / f"{name}.sqlite", domain=domain.name, benchmark="SQL")

    with open_store("serial") as store:
        serial = build_memory(
            domain, build, store, make_llm(), domain.make_evaluator(), cfg,
            checkpoints=(10, 40), checkpoint_dir=tmp_path / "serial-ckpt",
        )  # fmt: skip
    stats = ParallelStats()
    with open_store("parallel") as store:
        # resumes like build_memory: the first 5 tasks are already in the store
        build_memory(domain, build[:5], store, make_llm(), domain.make_evaluator(), cfg)
        parallel = build_memory_parallel(
            domain, build, store, make_llm, None, cfg, workers=2, stats=stats, patience=math.inf,
            checkpoints=(10, 40), checkpoint_dir=tmp_path / "parallel-ckpt",
        )  # fmt: skip
    assert serial.admitted >= 3 and parallel.skipped == 5
    assert not list(tmp_path.glob("*.sqlite-wal"))  # closed: every page is in the compared files
    assert (tmp_path / "serial.sqlite").read_bytes() == (tmp_path / "parallel.sqlite").read_bytes()
    for name in ("checkpoint-0010.sqlite", "checkpoint-0040.sqlite"):
        serial_ckpt = (tmp_path / "serial-ckpt" / name).read_bytes()
        assert serial_ckpt == (tmp_path / "parallel-ckpt" / name).read_bytes()
    # the workers did the work (the writer waited for every recording): most calls were replayed,
    # and only the 35 unbuilt tasks speculated
    assert stats.speculated == 35 and stats.speculation_errors == 0 and stats.late == 0
    assert stats.hits > stats.misses


@pytest.mark.slow
def test_build_command_with_workers_writes_the_serial_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cm_gym.cli import main

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = tmp_path / "store.sqlite"  # the store records its build settings, --out included
    argv = ["build", "--benchmark", "SQL", "--limit", "12", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    serial = out.read_bytes()
    out.unlink()
    assert main([*argv, "--workers", "2"]) == 0
    assert out.read_bytes() == serial


def _llm_failing_in_workers() -> SimulatedLLM:
    """The simulated LLM in the writer; a worker process cannot build it (it dies starting)."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        raise SystemExit("no LLM in this worker")
    return SimulatedLLM(seed=0)


@pytest.mark.slow
def test_workers_that_cannot_start_leave_the_writer_building_serially(tmp_path: Path) -> None:
    spec = get_benchmark("SQL")
    domain = get_domain(spec.domain_name)
    tasks = list(spec.load_tasks())
    by_id = {t.task_id: t for t in tasks}
    build = [by_id[i] for i in make_split(tasks, seed=12345, by_env=spec.split_by_env).build[:6]]
    stats = ParallelStats()
    with RecordStore(tmp_path / "s.sqlite", domain=domain.name, benchmark="SQL") as store:
        summary = build_memory_parallel(
            domain, build, store, _llm_failing_in_workers, workers=1, stats=stats, patience=math.inf
        )
        assert summary.tasks == 6 and store.processed_task_ids == {t.task_id for t in build}
    assert stats.hits == 0 and stats.speculation_errors >= 1
