"""SATLIB-style DIMACS folders as solver-configuration tasks (benchmark "SATLIB").

`load_satlib_tasks()` reads the five shipped families under ``data_root()/"sat"``;
`load_satlib_tasks(root=DIR)` discovers families in any folder: every sub-folder holding ``*.cnf``
(or ``*.dimacs``) files at any depth is a family, files directly in DIR form the family named after
DIR, and a ``sat/`` or ``unsat/`` folder on the way labels its files. Each family's conflict
allowance is declared (`FAMILIES`) or calibrated once (`cm_gym.domains.calibration`: the reference
solver with a cap of `CALIBRATION_CAP` conflicts, times `CALIBRATION_MARGIN`), every task's
reference configuration is run at the allowance, and tasks it does not decide are dropped and
counted. Files that cannot be read are listed together in one `DimacsError` (or recorded in a
`LoadReport`).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pysat

from cm_gym.core.paths import data_root
from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport, refused_message
from cm_gym.domains.calibration import (
    Calibration,
    Instance,
    Probe,
    ProbeCache,
    calibrate,
    digest_text,
    probe_references,
)
from cm_gym.domains.sat.dimacs import Cnf, parse_dimacs, read_dimacs_text
from cm_gym.domains.sat.errors import DimacsError
from cm_gym.domains.sat.evaluator import CPU_LIMIT_S
from cm_gym.domains.sat.solver import MAX_BUDGET, SolverConfig

logger = logging.getLogger(__name__)

SUFFIXES = (".cnf", ".dimacs")
REFERENCE_SOLVER = "maplecm"
#: calibration of an undeclared family: the reference's conflicts per instance (capped) x margin
CALIBRATION_CAP = 100_000
CALIBRATION_MARGIN = 1.5
ALLOWANCE_FLOOR = 10


@dataclass(frozen=True)
class FamilyInfo:
    """What a SATLIB family is, its declared conflict allowance and its satisfiability label."""

    description: str
    allowance: int
    expected: str | None = None


FAMILIES: dict[str, FamilyInfo] = {
    "uf20-91": FamilyInfo("uniform random 3-SAT, 20 variables, 91 clauses (satisfiable)", 12, "sat"),
    "uf50-218": FamilyInfo("uniform random 3-SAT, 50 variables, 218 clauses (satisfiable)", 130, "sat"),
    "uuf50-218": FamilyInfo("uniform random 3-SAT, 50 variables, 218 clauses (unsatisfiable)", 150, "unsat"),
    "flat30-60": FamilyInfo("flat graph 3-colouring, 30 vertices, 60 edges (satisfiable)", 50, "sat"),
    "flat100-239": FamilyInfo("flat graph 3-colouring, 100 vertices, 239 edges (satisfiable)", 50, "sat"),
}


def _natural(path: Path) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.as_posix()))


def discover(root: Path) -> dict[str, list[Path]]:
    """Family name -> its DIMACS files (natural order) under `root` (see the module docstring)."""
    groups: dict[str, list[Path]] = collections.defaultdict(list)
    for p in root.rglob("*"):
        if p.suffix.lower() not in SUFFIXES or p.is_dir():
            continue
        parts = p.relative_to(root).parts
        groups[parts[0] if len(parts) > 1 else root.name].append(p)
    return {fam: sorted(files, key=_natural) for fam, files in sorted(groups.items())}


def _label(path: Path, root: Path) -> str | None:
    parts = [part.lower() for part in path.relative_to(root).parts[:-1]]
    for name in ("unsat", "sat"):
        if name in parts:
            return name
    return None


def satlib_task(
    cnf: Cnf, fam: str, path: Path, allowance: int, task_id: str = "", meta: dict[str, str] | None = None
) -> Task:
    """The solver-action task for one parsed instance of family `fam`."""
    info = FAMILIES.get(fam)
    what = info.description if info else f"DIMACS CNF instances from folder {fam}"
    ratio = round(cnf.n_clauses / max(1, cnf.n_vars), 3)
    reference = SolverConfig(REFERENCE_SOLVER, "default", False, allowance).render()
    prompt = (
        f"Decide the CNF formula {path.name} (SATLIB family {fam}: {what}) with a python-sat "
        f"solver within a budget of at most {allowance} conflicts. Answer with a solver configuration."
    )
    context = (
        f"formula: {path.name}\nfamily: {fam}\nvariables: {cnf.n_vars}\nclauses: {cnf.n_clauses}\n"
        f"clause/variable ratio: {ratio}\nconflict allowance: {allowance}\n\n"
        "Configuration: 'key: value' lines. solver: one of maplecm, minisat22, glucose4, glucose42, "
        "glucose3, mergesat3, cadical195, cadical153, maplesat, minicard, gluecard4, maplechrono. "
        "phase: default | true | false. preprocess: off | on. budget: conflicts (at most the allowance). "
        "Solved = a verified model or an UNSAT answer within the budget."
    )
    return Task(
        task_id=task_id or f"satlib-{fam}-{path.stem}",
        domain="sat",
        prompt=prompt,
        env_id=f"satlib/{fam}",
        reference=reference,
        context=context,
        family=fam,
        features={
            "kind": "solver",
            "family": fam,
            "n_vars": cnf.n_vars,
            "n_clauses": cnf.n_clauses,
            "clause_var_ratio": ratio,
            "max_budget": allowance,
            "clause_width": cnf.max_width,
        },
        meta={"path": str(path), **(meta or {})},
    )


@dataclass
class _Parsed:
    path: Path
    cnf: Cnf
    digest: str
    label: str | None


@functools.lru_cache(maxsize=1)
def _probe_evaluator() -> Any:
    """One evaluator (one worker process) for every probe of this process."""
    from cm_gym.domains.sat.evaluator import SatEvaluator

    return SatEvaluator()


def _probe(items: list[_Parsed], fam: str, budget: int) -> list[Probe]:
    """The reference configuration checked by the world model at `budget` conflicts."""
    tasks = [satlib_task(item.cnf, fam, item.path, budget) for item in items]
    return probe_references(_probe_evaluator(), tasks, "conflicts")


def _read_family(files: Sequence[Path], root: Path, refused: list[tuple[str, str]]) -> list[_Parsed]:
    out = []
    for p in files:
        try:
            text = read_dimacs_text(p)
            out.append(_Parsed(p, parse_dimacs(text, str(p)), digest_text(text), _label(p, root)))
        except DimacsError as exc:
            refused.append((str(p), str(exc)))
    return out


def load_satlib_tasks(
    families: Iterable[str] | None = None,
    limit: int | None = None,
    root: str | Path | None = None,
    report: LoadReport | None = None,
) -> list[Task]:
    """SATLIB solver tasks: the shipped families under ``data_root()/"sat"`` (all five by default),
    or every family discovered under `root`. `limit` caps the files read per family; `report`
    collects refused files and dropped tasks instead of raising (see the module docstring)."""
    if root is None:
        base = data_root() / "sat"
        names = list(families) if families is not None else list(FAMILIES)
        groups = {}
        for fam in names:
            if not (base / fam).is_dir():
                raise DimacsError(f"{base / fam}: not a directory of DIMACS files")
            groups[fam] = discover(base / fam).get(fam, [])
        base_root = base
    else:
        base_root = Path(root)
        if not base_root.is_dir():
            raise DimacsError(f"{base_root}: not a directory of DIMACS files")
        groups = discover(base_root)
        if families is not None:
            wanted = list(families)
            groups = {f: groups.get(f, []) for f in wanted}
    refused: list[tuple[str, str]] = []
    parsed = {
        fam: _read_family(files[: max(0, limit)] if limit is not None else files, base_root, refused)
        for fam, files in groups.items()
    }
    if refused and report is None:
        raise DimacsError(refused_message(refused, "DIMACS"))
    if report is not None:
        report.refused.extend(refused)
    # probes count conflicts; one stopped by the CPU backstop is cached with that bound in its key,
    # one stopped by the wall-clock hang guard is never cached (`calibration`)
    cache = ProbeCache(
        "sat-" + REFERENCE_SOLVER, f"python-sat {pysat.__version__} conflicts cpu{CPU_LIMIT_S:g}s"
    )
    tasks: list[Task] = []
    for fam, items in parsed.items():
        tasks.extend(_family_tasks(fam, items, cache, report))
    logger.debug("loaded %d SATLIB tasks from %s", len(tasks), base_root)
    return tasks


def _family_tasks(fam: str, items: list[_Parsed], cache: ProbeCache, report: LoadReport | None) -> list[Task]:
    by_name = {str(item.path): item for item in items}
    info = FAMILIES.get(fam)
    calibration: Calibration = calibrate(
        fam,
        [Instance(str(item.path), item.digest) for item in items],
        lambda batch, budget: _probe([by_name[inst.name] for inst in batch], fam, budget),
        cache,
        declared=info.allowance if info else None,
        cap=CALIBRATION_CAP,
        margin=CALIBRATION_MARGIN,
        floor=ALLOWANCE_FLOOR,
        ceiling=MAX_BUDGET,
        unit="conflicts",
    )
    dropped = calibration.dropped
    stems = collections.Counter(item.path.stem for item in items)
    tasks = []
    for item in items:
        if str(item.path) in dropped:
            continue
        task_id = f"satlib-{fam}-{item.path.stem}"
        if stems[item.path.stem] > 1:  # same name in two sub-folders: a hash that does not reveal which
            task_id += "-" + hashlib.blake2b(str(item.path).encode(), digest_size=3).hexdigest()
        label = item.label or (info.expected if info else None)
        meta = {"sha256": item.digest, **({"label": label} if label else {})}
        task = satlib_task(item.cnf, fam, item.path, calibration.allowance, task_id, meta)
        verdict = calibration.probes[str(item.path)].verdict
        if label and verdict in ("sat", "unsat") and verdict != label and report is not None:
            report.disagreements.append((str(item.path), f"labelled {label} but the solver proves {verdict}"))
        tasks.append(task)
    _tell(fam, calibration, dropped, report)
    return tasks


def _tell(fam: str, calibration: Calibration, dropped: dict[str, str], report: LoadReport | None) -> None:
    if report is not None:
        report.notes.append((f"family {fam}", calibration.describe("conflicts")))
        report.dropped.extend(dropped.items())
        report.family_of.update(dict.fromkeys(dropped, fam))
        report.unverified.extend(calibration.unverified.items())
    if dropped:
        logger.warning(
            "SATLIB family %s: dropped %d of %d task(s) whose reference does not decide within the "
            "allowance of %d conflicts (cm-gym data check lists them)",
            fam,
            len(dropped),
            len(calibration.probes),
            calibration.allowance,
        )
