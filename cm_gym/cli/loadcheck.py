"""Run a benchmark's data check on a quiet machine and under an artificial CPU hog, and compare.

Issue 25's acceptance check: the same folder must give the same loaded tasks (refusals, drops)
and the same verdicts (kind, status, budget used in an exact unit) however busy the machine is.
Each run is *fresh*: its own cache folder (so calibration probes and bug vetting run again),
the loaders' in-process caches cleared, and no persistent verdict cache (Dafny, Coq). Used by
``tests/test_load_independence.py`` (a small sample) and ``bench/bench_load_independence.py``
(every shared folder).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cm_gym.cli.datacheck import DataCheck, check_dataset
from cm_gym.evaluators.cpuhog import CpuHog

#: loaders that keep what they read in an lru_cache (module, function)
_LOADER_CACHES = (
    ("cm_gym.domains.sql.loader", "_load_cached"),
    ("cm_gym.domains.code.loader", "_load"),
    ("cm_gym.domains.dafny.loader", "_load"),
    ("cm_gym.domains.math.loader", "_load"),
    ("cm_gym.domains.humaneval.loader", "_load"),
)
#: domains whose evaluator keeps a persistent verdict cache (turned off here)
_VERDICT_CACHES = frozenset({"dafny", "math"})


@contextmanager
def _cache_folder(folder: Path) -> Iterator[None]:
    before = os.environ.get("CM_GYM_CACHE")
    os.environ["CM_GYM_CACHE"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CM_GYM_CACHE", None)
        else:
            os.environ["CM_GYM_CACHE"] = before


def clear_loader_caches() -> None:
    """Forget every task list a loader kept in this process."""
    for module, name in _LOADER_CACHES:
        fn = getattr(importlib.import_module(module), name, None)
        if fn is not None and hasattr(fn, "cache_clear"):
            fn.cache_clear()


def fresh_check(benchmark: str, data: str | Path | None, *, limit: int | None, cache: Path) -> DataCheck:
    """`check_dataset` with nothing reused from an earlier run (see the module doc)."""
    from cm_gym.domains.registry import get_benchmark

    clear_loader_caches()
    domain = get_benchmark(benchmark).domain_name
    kwargs: dict[str, Any] = {"cache": None} if domain in _VERDICT_CACHES else {}
    with _cache_folder(cache):
        return check_dataset(benchmark, data, limit=limit, evaluator_kwargs=kwargs)


def differences(quiet: DataCheck, busy: DataCheck) -> list[str]:
    """What differs between two checks of the same folder (empty: load-independent)."""
    out = []
    for part, items in quiet.loaded().items():
        if items != busy.loaded()[part]:
            out.append(f"{part}: {len(items)} quiet vs {len(busy.loaded()[part])} under load")
    if quiet.load_error != busy.load_error:
        out.append(f"load error: {quiet.load_error!r} vs {busy.load_error!r}")
    q, b = quiet.verdicts(), busy.verdicts()
    if [v[0] for v in q] != [v[0] for v in b]:
        out.append(f"checked tasks differ: {len(q)} quiet vs {len(b)} under load")
    out += [f"{x[0]}: {x[1:]} quiet vs {y[1:]} under load" for x, y in zip(q, b, strict=False) if x != y]
    return out


@dataclass
class Comparison:
    """Two fresh checks of one folder and their wall times."""

    benchmark: str
    quiet: DataCheck
    busy: DataCheck
    quiet_s: float
    busy_s: float

    @property
    def differences(self) -> list[str]:
        return differences(self.quiet, self.busy)


def quiet_and_busy(
    benchmark: str, data: str | Path | None, *, limit: int | None, workdir: Path, hog: CpuHog | None = None
) -> Comparison:
    """Check `data` twice, fresh each time: as the machine is, then under `hog` (default: two
    spinners per core)."""
    t0 = time.perf_counter()
    quiet = fresh_check(benchmark, data, limit=limit, cache=workdir / "quiet")
    t1 = time.perf_counter()
    with hog or CpuHog(per_core=2):
        busy = fresh_check(benchmark, data, limit=limit, cache=workdir / "busy")
    t2 = time.perf_counter()
    return Comparison(benchmark, quiet, busy, t1 - t0, t2 - t1)
