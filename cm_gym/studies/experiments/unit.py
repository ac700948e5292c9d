"""Units of work and their results: the plain data the experiment runner (`runner.py`) schedules
and the unit kinds (`units.py`) compute, with the registry of unit kinds (`unit_kind`) and the code
version that is part of every unit key."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from cm_gym.core.types import CmGymError

logger = logging.getLogger(__name__)

#: ``fn(params, inputs, workdir) -> result`` for each unit kind (filled by `units.py`).
UnitFn = Callable[[Mapping[str, Any], Mapping[str, "UnitResult"], Path], dict[str, Any]]
UNIT_KINDS: dict[str, UnitFn] = {}


class ExperimentError(CmGymError):
    """An experiment or one of its units cannot run (bad configuration, a failed unit)."""


def unit_kind(name: str) -> Callable[[UnitFn], UnitFn]:
    """Register a unit function under `name` (decorator)."""

    def register(fn: UnitFn) -> UnitFn:
        UNIT_KINDS[name] = fn
        return fn

    return register


#: Sources that cannot change a unit's result (the CLI, report writing, the studies' planning and
#: reporting — a unit's parameters are explicit), so editing a report does not recompute units.
_NOT_IN_CODE_VERSION = ("cli/", "protocol/report.py", "studies/experiments/")
_IN_CODE_VERSION = (
    "studies/experiments/units.py",
    "studies/experiments/units_change.py",
    "studies/experiments/unit.py",
    "studies/experiments/runner.py",
)


@cache
def code_version() -> str:
    """A hash of the package source that computes units (every ``cm_gym/**/*.py`` except the CLI
    and the report side of `experiments`): part of every unit key, so a code change never reuses
    results computed by other code."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(_NOT_IN_CODE_VERSION) and rel not in _IN_CODE_VERSION:
            continue
        h.update(rel.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def canonical(obj: Any) -> str:
    """Deterministic JSON of plain data (sorted keys, no whitespace)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Resources:
    """What one unit needs (a backend may schedule on it; the local pool runs one unit per
    worker)."""

    cpus: float = 1.0
    memory_gb: float = 1.0


@dataclass(frozen=True)
class Unit:
    """One unit of work: `kind`, plain-data `params`, named input units `deps`, `resources`, a
    human-readable `label` and `runtime` settings (neither part of the key)."""

    kind: str
    params: Mapping[str, Any]
    deps: Mapping[str, Unit] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    label: str = field(default="", compare=False)
    #: settings that must not change a result (where the LLM cache lives, its mode): passed to the
    #: unit function with `params` but not part of the key
    runtime: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @cached_property
    def key(self) -> str:
        payload = {
            "kind": self.kind,
            "params": self.params,
            "deps": {name: dep.key for name, dep in sorted(self.deps.items())},
            "code": code_version(),
        }
        return hashlib.sha256(canonical(payload).encode()).hexdigest()[:20]

    def describe(self) -> str:
        return self.label or f"{self.kind}:{self.key[:8]}"


@dataclass(frozen=True)
class UnitResult:
    """A finished unit: its folder and its ``result.json`` data."""

    directory: Path
    data: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def path(self, key: str) -> Path:
        """An artefact path stored (relative to the unit folder) under `key`."""
        return self.directory / str(self.data[key])


def unit_dir(results_dir: Path, unit: Unit) -> Path:
    return Path(results_dir) / "units" / unit.kind / unit.key


def load_result(results_dir: Path, unit: Unit) -> UnitResult | None:
    """The cached result of `unit`, or None when it was never finished."""
    directory = unit_dir(results_dir, unit)
    path = directory / "result.json"
    if not path.is_file():
        return None
    try:
        return UnitResult(directory, json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        logger.warning("unreadable unit result %s (%s); recomputing", path, exc)
        return None
