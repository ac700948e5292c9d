"""The experiment runner: units of work cached by configuration, executed by a backend.

A `Unit` is plain data — a registered kind (`units.py`: build a store, train a selector, build a
mechanism, evaluate), its parameters (JSON-serialisable: benchmark, split ids, sizes, seeds …),
its named input units and its declared resource needs — so it pickles and can be shipped to any
executor. Its key is the sha256 of (kind, parameters, the input units' keys, the code version), so
a rerun recomputes only what changed: adding a seed adds units, the others are cache hits.

Every unit's result lands in one results directory, ``<results>/units/<kind>/<key>/``: its
artefacts (stores, checkpoints) and ``result.json``. A unit is computed in a private
``<key>.partial-<pid>-<n>`` folder and renamed into place when done, so a killed run never leaves a
half-written unit that looks finished, and two runners sharing a results directory never corrupt
each other (the second finisher discards its copy). Paths inside results are relative to the unit
folder (`UnitResult.path`), so a results directory can be moved.

Backends (`Backend`): `SerialBackend` (in this process), `ProcessPoolBackend` (a local process
pool, spawn context) and `cm_gym.backends.ray.experiments.RayBackend` (Ray tasks on a local instance
or a cluster) implement the same two methods; `execute_unit` is the one function a worker runs.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import shutil
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cm_gym.studies.experiments.unit import (
    UNIT_KINDS,
    ExperimentError,
    Resources,
    Unit,
    UnitFn,
    UnitResult,
    canonical,
    code_version,
    load_result,
    unit_dir,
    unit_kind,
)

__all__ = [
    "BACKENDS",
    "UNIT_KINDS",
    "Backend",
    "ExperimentError",
    "ProcessPoolBackend",
    "Resources",
    "Runner",
    "SerialBackend",
    "Unit",
    "UnitFn",
    "UnitResult",
    "canonical",
    "code_version",
    "execute_unit",
    "load_result",
    "make_backend",
    "result_fingerprint",
    "unit_dir",
    "unit_kind",
]

logger = logging.getLogger(__name__)
_counter = itertools.count()


def execute_unit(unit: Unit, inputs: Mapping[str, UnitResult], results_dir: str) -> UnitResult:
    """Run one unit in a private folder and move it into place (what every backend worker runs)."""
    from cm_gym.studies.experiments import units as _units  # noqa: F401 - registers the unit kinds
    from cm_gym.studies.experiments import units_change as _units_change  # noqa: F401 - and the change kinds

    final = unit_dir(Path(results_dir), unit)
    done = load_result(Path(results_dir), unit)
    if done is not None:
        return done
    partial = final.with_name(f"{final.name}.partial-{os.getpid()}-{next(_counter)}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    fn = UNIT_KINDS.get(unit.kind)
    if fn is None:
        raise ExperimentError(f"unknown unit kind {unit.kind!r}; known: {', '.join(sorted(UNIT_KINDS))}")
    started = time.perf_counter()
    try:
        data = fn({**unit.params, **unit.runtime}, inputs, partial)
        data = {
            **data,
            "_unit": {"kind": unit.kind, "label": unit.label, "seconds": time.perf_counter() - started},
        }
        (partial / "result.json").write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
        if final.exists() and load_result(Path(results_dir), unit) is None:
            shutil.rmtree(final, ignore_errors=True)  # an unfinished or corrupt earlier attempt
        try:
            os.rename(partial, final)
        except OSError:  # another runner finished the same unit first: keep theirs
            shutil.rmtree(partial, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    result = load_result(Path(results_dir), unit)
    if result is None:  # pragma: no cover - rename raced and the other copy vanished
        raise ExperimentError(f"unit {unit.describe()} finished but its result is missing")
    return result


#: keys of a unit's ``result.json`` that hold wall-clock times (they differ between any two runs)
TIMING_KEYS = frozenset({"seconds", "train_seconds", "timings"})
#: artefacts that describe another artefact with run-specific metadata (a snapshot's manifest:
#: its path and write time; the snapshot's bytes are compared themselves)
DERIVED_SUFFIXES = (".manifest.json", ".lock")
#: members of an SB3 zip that hold run metadata (start time, episode wall times, object
#: addresses, library versions), not what was learned; the weights and optimizer state are compared
VOLATILE_MEMBERS = frozenset({"data", "system_info.txt", "_stable_baselines3_version"})


def _without_timings(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def result_fingerprint(result: UnitResult) -> str:
    """sha256 of what a unit computed: its result data less wall-clock times, and the bytes of
    every artefact in its folder (a zip archive by its members' contents, since zip headers carry
    write times; SB3's metadata members and snapshot manifests are left out, see
    `VOLATILE_MEMBERS`, `DERIVED_SUFFIXES`). Two backends that computed the same thing give the same
    fingerprint (stores need ``SOURCE_DATE_EPOCH``: a store records its creation time)."""
    import zipfile

    h = hashlib.sha256(canonical(_without_timings(dict(result.data))).encode())
    artefacts = sorted(
        p
        for p in result.directory.rglob("*")
        if p.is_file() and p.name != "result.json" and not p.name.endswith(DERIVED_SUFFIXES)
    )
    for path in artefacts:
        h.update(path.relative_to(result.directory).as_posix().encode() + b"\0")
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for name in sorted(set(archive.namelist()) - VOLATILE_MEMBERS):
                    h.update(name.encode() + b"\0" + hashlib.sha256(archive.read(name)).digest())
        else:
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


class Backend:
    """Executes units: `submit(unit, inputs, results_dir)` returns a Future of `UnitResult`."""

    workers: int = 1

    def submit(self, unit: Unit, inputs: Mapping[str, UnitResult], results_dir: str) -> cf.Future[UnitResult]:
        raise NotImplementedError

    def close(self) -> None:
        """Release workers."""


class SerialBackend(Backend):
    """Runs every unit in this process, one at a time."""

    def submit(self, unit: Unit, inputs: Mapping[str, UnitResult], results_dir: str) -> cf.Future[UnitResult]:
        future: cf.Future[UnitResult] = cf.Future()
        try:
            future.set_result(execute_unit(unit, inputs, results_dir))
        except Exception as exc:  # noqa: BLE001 - delivered through the future like a pool's
            future.set_exception(exc)
        return future


def _die_with_parent(parent: int) -> None:
    """Pool-worker initializer: killed when the experiment's process dies (``PR_SET_PDEATHSIG``),
    so a killed run leaves no worker computing units for nobody (seen: four orphans ran Dafny
    checks for an hour after their run was stopped)."""
    with contextlib.suppress(Exception):  # not Linux: the pool's own shutdown still applies
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(0)


class ProcessPoolBackend(Backend):
    """A local pool of `workers` processes (spawn: no state leaks from the parent; each dies with
    the parent)."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, int(workers))
        self._pool = cf.ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_die_with_parent,
            initargs=(os.getpid(),),
        )

    def submit(self, unit: Unit, inputs: Mapping[str, UnitResult], results_dir: str) -> cf.Future[UnitResult]:
        return self._pool.submit(execute_unit, unit, inputs, results_dir)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


#: ``--backend`` choices: this machine (serial or a process pool) or Ray (a local instance or a
#: cluster at ``address``; `cm_gym.backends.ray.experiments`, the optional ``ray`` extra)
BACKENDS = ("local", "ray")


def make_backend(workers: int = 1, kind: str = "local", address: str | None = None) -> Backend:
    """``local``: `SerialBackend` for one worker, else a `ProcessPoolBackend`. ``ray``: a
    `RayBackend` on the cluster at `address`, or on a local instance of `workers` CPUs (None or
    1 = all of this machine's)."""
    if kind == "ray":  # the Ray backend is a plugin (`cm_gym.core.plugins`, group cm_gym.experiment_backends)
        from cm_gym.core.plugins import resolve

        return resolve("cm_gym.experiment_backends", "ray")(address, workers if workers > 1 else None)
    if kind != "local":
        raise ExperimentError(f"unknown backend {kind!r}; choose from {', '.join(BACKENDS)}")
    if address:
        raise ExperimentError("--address needs --backend ray")
    return SerialBackend() if workers <= 1 else ProcessPoolBackend(workers)


class Runner:
    """Runs units (and their inputs) through a backend, reusing every finished unit."""

    def __init__(
        self, results_dir: str | Path, backend: Backend | None = None, progress: bool = True
    ) -> None:
        self.results_dir = Path(results_dir)
        self.backend = backend or SerialBackend()
        self.progress = progress
        self.computed = 0
        self.reused = 0

    def _closure(self, units: Iterable[Unit]) -> dict[str, Unit]:
        out: dict[str, Unit] = {}
        stack = list(units)
        while stack:
            unit = stack.pop()
            if unit.key not in out:
                out[unit.key] = unit
                stack.extend(unit.deps.values())
        return out

    def run(self, units: Iterable[Unit]) -> list[UnitResult]:
        """Results of `units` (in order), computing only the ones not finished before."""
        wanted = list(units)
        todo = self._closure(wanted)
        done: dict[str, UnitResult] = {}
        for key, unit in todo.items():
            cached = load_result(self.results_dir, unit)
            if cached is not None:
                done[key] = cached
        self.reused += len(done)
        pending = {k: u for k, u in todo.items() if k not in done}
        bar = None
        if self.progress and pending:
            from cm_gym.core.progress import progress_bar

            bar = progress_bar(len(todo), "units", "unit", initial=len(done))
        running: dict[cf.Future[UnitResult], Unit] = {}
        try:
            while pending or running:
                for key, unit in list(pending.items()):
                    if len(running) >= max(1, self.backend.workers):
                        break
                    if all(dep.key in done for dep in unit.deps.values()):
                        inputs = {name: done[dep.key] for name, dep in unit.deps.items()}
                        running[self.backend.submit(unit, inputs, str(self.results_dir))] = unit
                        del pending[key]
                if not running:
                    raise ExperimentError("unit graph has unsatisfiable inputs")  # pragma: no cover
                finished, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
                for future in finished:
                    unit = running.pop(future)
                    try:
                        done[unit.key] = future.result()
                    except Exception as exc:
                        raise ExperimentError(f"unit {unit.describe()} failed: {exc}") from exc
                    self.computed += 1
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix_str(unit.describe()[-40:])
        finally:
            if bar is not None:
                bar.close()
        return [done[u.key] for u in wanted]

    def close(self) -> None:
        self.backend.close()
