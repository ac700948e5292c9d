"""Resource allowances of solver benchmarks: declared per family, or calibrated once and cached.

A solver task states an allowance (SAT conflicts, z3 rlimit units) and its reference configuration
spends at most that. A family's allowance is never a silent constant: either it is *declared* (the
built-in families, checked by ``bench/bench_sat_smt.py``), and every instance's reference is run
at that allowance; or it is *calibrated*: the reference runs on every instance with a generous
`cap`, and the allowance is the most any instance needed times a stated `margin` (budgeted solvers
replay exactly, so an instance that needed n ≤ allowance / margin units decides within the
allowance too). Instances the reference does not decide are dropped, with the reason, and counted.

Every probe is measured in the solver's deterministic unit (conflicts, rlimit units), never in
wall time, so which instances a folder serves does not depend on how busy the machine was. A
probe the world model's wall-clock hang guard stopped (status "infrastructure", after one retry)
says nothing about the instance: it is neither cached nor dropped, the instance is served, and the
loader lists it (`Calibration.unverified`, ``LoadReport.unverified``) so that ``cm-gym data check``
fails until a quieter run verifies it.

Probes are cached per instance content under ``cache_dir("calibration")`` (keyed by the content
digest, the budget, the solver's version and deterministic bounds, and `CALIBRATION_VERSION`:
version 1 keys carried the wall-clock bound and are never read again), so a folder is probed once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.core.types import Action, AgentState, Task

logger = logging.getLogger(__name__)

CALIBRATION_VERSION = 2
BATCH = 64


@dataclass(frozen=True)
class Probe:
    """The reference configuration's run on one instance: decided (with a right answer) within
    the budget, the resource units it used, its verdict, and why not when it did not."""

    decided: bool
    used: int
    verdict: str = ""
    reason: str = ""
    infrastructure: bool = False  # stopped by the hang guard: unknown, never cached


@dataclass(frozen=True)
class Instance:
    """One instance to probe: a name for reports, its content digest, and what `run` needs."""

    name: str
    digest: str
    payload: object = None


@dataclass
class Calibration:
    """A family's allowance, where it came from, and each instance's probe (by name)."""

    family: str
    allowance: int
    source: str  # "declared" | "calibrated"
    probes: dict[str, Probe] = field(default_factory=dict)

    @property
    def dropped(self) -> dict[str, str]:
        """Instance name -> why its reference does not decide within the allowance."""
        out = {}
        for name, p in self.probes.items():
            if p.infrastructure:
                continue
            if not p.decided:
                out[name] = p.reason or "the reference does not decide it"
            elif p.used > self.allowance:
                out[name] = f"the reference needs {p.used} units, over the allowance of {self.allowance}"
        return out

    @property
    def unverified(self) -> dict[str, str]:
        """Instance name -> why its probe says nothing (the hang guard stopped it): served anyway."""
        return {name: p.reason for name, p in self.probes.items() if p.infrastructure}

    def describe(self, unit: str) -> str:
        """One line for reports and logs."""
        kept = len(self.probes) - len(self.dropped)
        how = "declared" if self.source == "declared" else "calibrated"
        return (
            f"allowance {self.allowance} {unit} ({how}); the reference decides {kept} of "
            f"{len(self.probes)} instance(s) within it"
        )


def probe_references(evaluator: Any, tasks: Sequence[Task], used_key: str) -> list[Probe]:
    """Check each task's reference with `evaluator` (the world model itself, `check_batch`):
    decided when solved; the resources used are ``outcome.details[used_key]``."""
    out = []
    for outcome in evaluator.check_batch([(AgentState(t), Action(t.reference)) for t in tasks]):
        used = int(outcome.details.get(used_key, 0) or 0)
        verdict = str(outcome.details.get("verdict", ""))
        if outcome.status == "infrastructure":
            out.append(Probe(False, 0, "", f"not verified: {outcome.reason}", infrastructure=True))
            continue
        why = (
            "" if outcome.solved else f"the reference does not decide it ({outcome.status}: {outcome.reason})"
        )
        out.append(Probe(outcome.solved, used, verdict, why))
    return out


def digest_text(text: str) -> str:
    """Content digest of an instance (the cache key part that changes when a file is edited)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
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


class ProbeCache:
    """Probes of one solver namespace in one JSON file (read once, written atomically)."""

    def __init__(self, namespace: str, solver_version: str) -> None:
        self.namespace, self.solver_version = namespace, solver_version
        self._path: Path | None = None
        self._data: dict[str, dict[str, object]] = {}
        self._dirty = False
        try:
            self._path = cache_dir("calibration") / f"{namespace}.json"
            if self._path.is_file():
                self._data = json.loads(self._path.read_text())
        except (OSError, ValueError) as exc:  # an unusable cache only costs time
            logger.warning("calibration cache unusable (%s); probing again", exc)
            self._data = {}

    def key(self, digest: str, budget: int) -> str:
        return f"{digest}:{budget}:{self.solver_version}:{CALIBRATION_VERSION}"

    def get(self, digest: str, budget: int) -> Probe | None:
        raw = self._data.get(self.key(digest, budget))
        try:
            return Probe(**raw) if isinstance(raw, dict) else None  # type: ignore[arg-type]
        except TypeError:
            return None

    def put(self, digest: str, budget: int, probe: Probe) -> None:
        if probe.infrastructure:  # the hang guard's verdict is about the machine: never kept
            return
        self._data[self.key(digest, budget)] = asdict(probe)
        self._dirty = True

    def save(self) -> None:
        if not self._dirty or self._path is None:
            return
        try:
            with _locked(self._path.with_suffix(".lock")):
                merged: dict[str, object] = {}
                if self._path.is_file():
                    with contextlib.suppress(ValueError):
                        merged = json.loads(self._path.read_text())
                merged.update(self._data)
                tmp = self._path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(merged, sort_keys=True))
                os.replace(tmp, self._path)
            self._dirty = False
        except OSError as exc:
            logger.warning("could not save the calibration cache (%s)", exc)


def calibrate(
    family: str,
    instances: Sequence[Instance],
    run: Callable[[list[Instance], int], list[Probe]],
    cache: ProbeCache,
    *,
    declared: int | None,
    cap: int,
    margin: float,
    floor: int,
    ceiling: int,
    unit: str,
) -> Calibration:
    """The family's allowance and every instance's probe (see the module docstring). `run`
    probes a batch of instances at a budget (batches of `BATCH`, so a worker round trip is paid
    once per batch, not per instance)."""
    budget = declared if declared is not None else cap
    probes: dict[str, Probe] = {}
    fresh: dict[str, Probe] = {}  # this run's probes, including the uncached infrastructure ones
    todo = [inst for inst in instances if cache.get(inst.digest, budget) is None]
    bar = None
    if len(todo) > 20:
        from cm_gym.core.progress import progress_bar

        bar = progress_bar(len(todo), f"probing {family}", "file", leave=False)
        logger.info("probing the reference on %d %s instance(s) (cached afterwards)", len(todo), family)
    try:
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            for inst, probe in zip(batch, run(batch, budget), strict=True):
                cache.put(inst.digest, budget, probe)
                fresh[inst.name] = probe
            if bar is not None:
                bar.update(len(batch))
        for inst in instances:
            probes[inst.name] = (
                cache.get(inst.digest, budget) or fresh.get(inst.name) or Probe(False, 0, reason="not probed")
            )
    finally:
        if bar is not None:
            bar.close()
        cache.save()
    if declared is not None:
        return Calibration(family, declared, "declared", probes)
    needed = [p.used for p in probes.values() if p.decided and not p.infrastructure]
    allowance = min(ceiling, max(floor, math.ceil(max(needed, default=0) * margin)))
    calibration = Calibration(family, allowance, "calibrated", probes)
    logger.info(
        "%s: %s (max needed %d x margin %.2f)",
        family,
        calibration.describe(unit),
        max(needed, default=0),
        margin,
    )
    return calibration
