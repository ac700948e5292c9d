"""Shared pieces of the benchmark scripts: a synthetic record source over column arrays whose
`Record`s are built only for the rows a retrieval returns (`bench_retrieval.py`, `bench_ann.py`),
a benchmark's build tasks (`bench_construction.py`, `bench_parallel_construction.py`) and the
first `gym.make` on a fresh cache (`bench_dafny_slips.py`, `bench_math.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from cm_gym.core.splits import make_split
from cm_gym.core.types import Task
from cm_gym.domains.base import Domain
from cm_gym.domains.registry import BenchmarkSpec, get_benchmark, get_domain
from cm_gym.memory.record import Record


class ColumnSource:
    """A RecordSource over column arrays, rows already in the index's (domain, condition) order so
    the index is a view of the embedding matrix. A subclass fills the columns (`n`, `embeddings`,
    `conds` with `cond_idx`, `src_idx`, `u`, `embedder_id`, `dim`) and may override each row's
    domain and situation text."""

    n: int
    embeddings: np.ndarray
    conds: list[str]
    cond_idx: np.ndarray
    src_idx: np.ndarray
    u: np.ndarray
    domain = "sql"
    revision = layout_revision = 0

    @cached_property
    def records(self) -> LazyRecords:
        return LazyRecords(self)

    def row_domains(self) -> list[str]:
        """Every row's domain (one domain unless overridden)."""
        return [self.domain] * self.n

    def row_domain(self, i: int) -> str:
        return self.domain

    def situation(self, i: int) -> str:
        return "synthetic"

    def index_columns(self) -> dict[str, Any]:
        return {
            "record_ids": [f"{i:016x}" for i in range(self.n)],
            "source_task_ids": [f"task-{j}" for j in self.src_idx],
            "domains": self.row_domains(),
            "conditions": [self.conds[c] for c in self.cond_idx],
            "u": self.u,
        }

    def record(self, i: int) -> Record:
        """Row `i` as a `Record` (built on demand)."""
        return Record(
            record_id=f"{i:016x}",
            domain=self.row_domain(i),
            source_task_id=f"task-{self.src_idx[i]}",
            env_id="db",
            situation=self.situation(i),
            a_minus="a > 1",
            a_plus="a >= 1",
            condition=self.conds[self.cond_idx[i]],
            u=float(self.u[i]),
        )


class LazyRecords(Sequence[Record]):
    """The rows of a `ColumnSource` as a sequence of `Record`s, each built when read."""

    def __init__(self, src: ColumnSource) -> None:
        self.src = src

    def __len__(self) -> int:
        return self.src.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.src.n))]
        return self.src.record(i)

    def __iter__(self) -> Iterator[Record]:
        return (self[i] for i in range(self.src.n))


def build_tasks(benchmark: str, n: int) -> tuple[BenchmarkSpec, Domain, list[Task], list[Task]]:
    """A benchmark, its domain, all its tasks and the first `n` tasks of its default T_build."""
    spec = get_benchmark(benchmark)
    domain = get_domain(spec.domain_name)
    tasks = list(spec.load_tasks())
    split = make_split(tasks, seed=12345, by_env=spec.split_by_env)
    by_id = {t.task_id: t for t in tasks}
    return spec, domain, tasks, [by_id[i] for i in split.build[:n]]


def first_make(env_id: str) -> tuple[str, str, float] | None:
    """The first ``gym.make(env_id)`` in a fresh interpreter on an empty cache: (seconds in the
    process, records in its default store, wall seconds with interpreter start), or None (printed)
    when it failed."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CM_GYM_CACHE=cache)
        code = ("import time; t=time.perf_counter(); import gymnasium as gym, cm_gym; "
                f"e=gym.make('{env_id}'); print(f'{{time.perf_counter()-t:.1f}}'); "
                "print(len(e.unwrapped.store.records))")  # fmt: skip
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - start
        lines = out.stdout.split()
        if out.returncode != 0 or len(lines) < 2:
            print(f"first gym.make failed: {out.stderr[-500:]}")
            return None
        return lines[0], lines[1], wall
