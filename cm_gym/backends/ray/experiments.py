"""`RayBackend`: the experiment runner's units as Ray tasks (``cm-gym experiment … --backend ray``).

Each unit is one Ray task with the unit's declared `Resources` (CPUs, memory), so Ray places it
on any node with room; a task whose worker dies (killed, OOM, a lost node) is retried up to
`max_retries` times — `execute_unit` writes into a private folder and renames it into place, so a
killed attempt never leaves a unit that looks finished. A unit's own exception is not retried: it
is reported by the runner, naming the unit.

Results always land in the driver's results folder. A worker that sees that folder (one machine, or
a cluster with shared storage) works in it directly; one that does not gets its inputs and the LLM
response cache through the object store, runs in node-local scratch, and ships the unit folder
and its new cache rows back (`shipping`). Before a unit runs, the worker checks that its copy of
the benchmark has the content the unit was planned with (a node with other data is refused with a
line naming the node), so the same command gives the same results on a laptop and on a cluster.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cm_gym.backends.ray import shipping
from cm_gym.backends.ray.cluster import connect, disconnect, require_ray
from cm_gym.studies.experiments.runner import (
    Backend,
    ExperimentError,
    Unit,
    UnitResult,
    execute_unit,
    load_result,
    unit_dir,
)

logger = logging.getLogger(__name__)

#: how each worker finds the driver's results: "auto" (detect), "shared" or "ship" (always copy)
SHIP_MODES = ("auto", "shared", "ship")


def _check_data(unit: Unit) -> None:
    """Refuse to run a unit on a node whose benchmark content differs from the planner's."""
    params = unit.params
    if "benchmark" not in params or "data" not in params:
        return
    from cm_gym.studies.experiments.units import data_version

    here = data_version(params["benchmark"])
    if here != params["data"]:
        raise ExperimentError(
            f"node {socket.gethostname()} has other {params['benchmark']} data (version {here}, the run "
            f"was planned on {params['data']}): give every node the same data folder (CM_GYM_DATA)"
        )


def _cache_path(unit: Unit) -> Path | None:
    """The LLM response cache a unit reads and writes (None: the simulator without a cache)."""
    path = unit.runtime.get("llm_cache")
    return Path(path) if path and unit.runtime.get("llm_cache_mode", "rw") != "off" else None


def _with_driver_cache(unit: Unit) -> Unit:
    """A real LLM without an explicit cache file uses the *driver's* default cache, so every
    worker's replies land in one file (a node's own default would scatter them)."""
    llm = str(unit.params.get("llm", "simulated"))
    if unit.runtime.get("llm_cache") or llm.startswith(("simulated", "recorded")) or "llm" not in unit.params:
        return unit
    from cm_gym.llm.cache import default_cache_path

    return replace(unit, runtime={**unit.runtime, "llm_cache": str(default_cache_path())})


def run_unit(
    unit: Unit,
    inputs: Mapping[str, tuple[str, str, Any]],
    results_dir: str,
    token: str,
    mode: str,
    imports: Sequence[str],
    cache_ref: list[Any],
) -> tuple[str, bytes | None, list[shipping.Row]]:
    """What a Ray worker runs for one unit. `inputs` maps a name to (kind, key, [ObjectRef of the
    packed folder]); returns ("shared", None, []) when the unit was written into the shared results
    folder, else ("shipped", packed unit folder, new LLM-cache rows)."""
    for module in imports:
        importlib.import_module(module)
    _check_data(unit)
    if mode != "ship" and shipping.sees(results_dir, token):
        loaded = {name: _load(Path(results_dir), kind, key) for name, (kind, key, _) in inputs.items()}
        execute_unit(unit, loaded, results_dir)
        return "shared", None, []
    if mode == "shared":
        raise ExperimentError(
            f"node {socket.gethostname()} does not see the results folder {results_dir} (--ship shared)"
        )
    ray = require_ray()
    scratch = shipping.scratch_root(token)
    loaded = {}
    for name, (kind, key, ref) in inputs.items():
        folder = scratch / "units" / kind / key
        if not (folder / "result.json").is_file():
            shipping.unpack_dir(ray.get(ref[0]), folder)
        loaded[name] = _load(scratch, kind, key)
    cache = _cache_path(unit)
    started = time.time()
    if cache is not None and cache_ref:
        local = shipping.materialise(ray.get(cache_ref[0]), scratch / "llm" / "responses.sqlite")
        unit = replace(unit, runtime={**unit.runtime, "llm_cache": str(local)})
    execute_unit(unit, loaded, str(scratch))
    rows = shipping.cache_rows_since(scratch / "llm" / "responses.sqlite", started) if cache else []
    folder = unit_dir(scratch, unit)
    packed = shipping.pack_dir(folder)
    shutil.rmtree(folder, ignore_errors=True)  # the driver keeps it; inputs stay cached on the node
    return "shipped", packed, rows


def _load(root: Path, kind: str, key: str) -> UnitResult:
    """A finished input unit by its folder (``root/units/kind/key``)."""
    directory = root / "units" / kind / key
    try:
        return UnitResult(directory, json.loads((directory / "result.json").read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ExperimentError(
            f"input unit {kind}/{key} is missing or unreadable on this node: {exc}"
        ) from None


class RayBackend(Backend):
    """Runs units as Ray tasks on a local instance (default) or the cluster at `address`.

    `workers` sizes a local instance (CPUs; default: all of this machine's); on a cluster the
    cluster's resources decide. `ship` is "auto" (detect whether workers see the results folder),
    "shared" (require it) or "ship" (always copy through the object store). `imports` are modules
    every worker imports before running a unit (your own `unit_kind` registrations)."""

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        *,
        max_retries: int = 3,
        ship: str = "auto",
        imports: Sequence[str] = (),
    ) -> None:
        if ship not in SHIP_MODES:
            raise ExperimentError(f"ship must be one of {', '.join(SHIP_MODES)}, got {ship!r}")
        self._ray = require_ray()
        self._owns = connect(address, workers)
        cpus = float(self._ray.cluster_resources().get("CPU", 1.0))
        # Ray queues and places tasks itself; the runner only needs enough in flight to fill it
        self.workers = max(2, int(cpus) * 2)
        self.cpus, self.ship, self.imports = cpus, ship, tuple(imports)
        self.max_retries = int(max_retries)
        self._remote = self._ray.remote(run_unit)
        self._packed: dict[str, Any] = {}  # unit key -> ObjectRef of its packed folder
        self._cache_refs: dict[str, Any] = {}  # cache path -> ObjectRef of its bytes

    def _input_ref(self, result: UnitResult) -> Any:
        key = result.directory.name
        if key not in self._packed:  # put once: workers that need it fetch it, the others ignore it
            self._packed[key] = self._ray.put(shipping.pack_dir(result.directory))
        return self._packed[key]

    def _cache_ref(self, unit: Unit) -> list[Any]:
        path = _cache_path(unit)
        if path is None or not path.is_file():
            return []
        if str(path) not in self._cache_refs:
            self._cache_refs[str(path)] = self._ray.put(shipping.copy_sqlite(path))
        return [self._cache_refs[str(path)]]

    def submit(self, unit: Unit, inputs: Mapping[str, UnitResult], results_dir: str) -> cf.Future[UnitResult]:
        root = Path(results_dir).resolve()
        unit = _with_driver_cache(unit)
        token = shipping.results_token(root)
        shipped = {
            name: (r.directory.parent.name, r.directory.name, [self._input_ref(r)])
            for name, r in inputs.items()
        }
        options = {
            "num_cpus": unit.resources.cpus,
            "memory": int(unit.resources.memory_gb * 2**30),
            "max_retries": self.max_retries,
            "retry_exceptions": False,
            "name": unit.describe()[:60],
        }
        ref = self._remote.options(**options).remote(
            unit, shipped, str(root), token, self.ship, self.imports, self._cache_ref(unit)
        )
        out: cf.Future[UnitResult] = cf.Future()

        def finish(done: cf.Future) -> None:
            try:
                how, data, rows = done.result()
                if how == "shipped":
                    shipping.unpack_dir(data, unit_dir(root, unit))
                    cache = _cache_path(unit)
                    if cache is not None and rows:
                        shipping.insert_cache_rows(cache, rows)
                result = load_result(root, unit)
                if result is None:
                    raise ExperimentError(f"unit {unit.describe()} finished but its result is missing")
                _remove_dead_partials(unit_dir(root, unit))
                out.set_result(result)
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                out.set_exception(_unwrap(exc))

        ref.future().add_done_callback(finish)
        return out

    def close(self) -> None:
        self._packed.clear()
        self._cache_refs.clear()
        if self._owns:
            disconnect()


def _remove_dead_partials(final: Path) -> None:
    """Remove what killed attempts of a finished unit left (``<key>.partial-<pid>-<n>`` of a
    process that no longer runs on this machine)."""
    for partial in final.parent.glob(f"{final.name}.partial-*"):
        try:
            pid = int(partial.name.rsplit(".partial-", 1)[1].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(partial, ignore_errors=True)
        except (ValueError, IndexError, PermissionError):
            continue


def _unwrap(exc: BaseException) -> BaseException:
    """The unit's own exception from a Ray task error (so the runner reports the real cause)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    return exc
