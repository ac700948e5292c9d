"""SMT-LIB folders as z3-configuration tasks (benchmark "SMTLIB").

`load_smtlib_tasks()` reads the shipped QF_LIA / QF_LRA / QF_BV subsets under
``data_root()/"smt"/<LOGIC>``; `load_smtlib_tasks(root=DIR)` reads every ``*.smt2`` file under any
folder, in any logic: a task's logic (its family) comes from the file's ``set-logic``, a ``sat/``
or ``unsat/`` folder on the way is the upstream label, and a folder named after another logic, or
a label that contradicts the header's ``:status``, is reported (the header wins). Files whose
status is unknown (or missing) are tasks checked without a status: a ``sat`` answer must come with
a model that satisfies every assertion, and ``unsat`` is z3's proof, as for SAT.

Each logic's rlimit allowance is declared (`ALLOWANCE`, the shipped logics) or calibrated once
(the reference with a cap of `CALIBRATION_CAP`, times `CALIBRATION_MARGIN`; see
`cm_gym.domains.calibration`). On a folder given with ``root=`` every task's reference is checked
at its allowance and the ones it does not decide (or decides against the header) are dropped and
counted; the shipped subsets are checked by ``cm-gym data check`` / ``bench/bench_sat_smt.py``
instead of at every load. Unreadable or malformed files are listed together in one `SmtLibError`
(or recorded in a `LoadReport`).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from cm_gym.domains.smt.errors import SmtLibError
from cm_gym.domains.smt.evaluator import CPU_LIMIT_S
from cm_gym.domains.smt.logics import is_logic_name
from cm_gym.domains.smt.smtlib import SmtFile, parse_smtlib, read_smtlib_text
from cm_gym.domains.smt.solver import MAX_RLIMIT, SmtConfig

logger = logging.getLogger(__name__)

LOGIC_DIRS = ("QF_LIA", "QF_LRA", "QF_BV")
#: the declared rlimit allowance and reference tactic of the shipped logics
ALLOWANCE = {"QF_LIA": 2_000_000, "QF_LRA": 100_000, "QF_BV": 2_000_000}
REFERENCE_TACTIC = {"QF_LIA": "smt", "QF_LRA": "default", "QF_BV": "(then simplify smt)"}
#: calibration of an undeclared logic: the reference's rlimit use per file (capped) x margin
CALIBRATION_CAP = 20_000_000
CALIBRATION_MARGIN = 1.5
ALLOWANCE_FLOOR = 10_000
#: the CPU backstop of a calibration probe: far above what `CALIBRATION_CAP` rlimit units cost,
#: so that the rlimit, not CPU time, decides which files a folder serves (hang guard: ten times it)
CALIBRATION_CPU_S = max(CPU_LIMIT_S, 600.0)
LABELS = ("sat", "unsat")


def reference_config(logic: str, allowance: int) -> SmtConfig:
    """The reference configuration of a logic: z3's solver for it (any SMT-LIB logic name; a name
    that is not one gets "auto"), the logic's tactic, the allowance as rlimit."""
    return SmtConfig(
        logic if is_logic_name(logic) else "auto", REFERENCE_TACTIC.get(logic, "default"), allowance
    )


def smtlib_task(info: SmtFile, task_id: str, allowance: int, meta: dict[str, str] | None = None) -> Task:
    """The solver-configuration task for one benchmark file."""
    name = Path(info.path).name
    prompt = (
        f"Decide the SMT-LIB benchmark {name} (logic {info.logic}, {info.n_asserts} assertions over "
        f"{info.n_decls} declared symbols) with z3 within a resource limit of at most {allowance} "
        "rlimit units. Answer with a solver configuration."
    )
    context = (
        f"benchmark: {name}\nlogic: {info.logic}\ncategory: {info.category or 'unknown'}\n"
        f"assertions: {info.n_asserts}\ndeclarations: {info.n_decls}\n"
        f"quantifiers: {'yes' if info.quantified else 'no'}\n"
        f"non-linear terms: {'yes' if info.has_nonlinear else 'no'}\nrlimit allowance: {allowance}\n\n"
        "Configuration: 'key: value' lines. logic: auto or an SMT-LIB logic (z3 SolverFor); tactic: "
        "default, a z3 tactic (smt, simplify, qflra, qfbv, nlsat, bit-blast, sat, ...) or (then ...) / "
        "(or-else ...) / (repeat ...); rlimit: z3 resource units, at most the allowance. "
        "Solved = the benchmark's status, with a sat model that satisfies every assertion."
    )
    return Task(
        task_id=task_id,
        domain="smt",
        prompt=prompt,
        env_id=f"smtlib/{info.logic}",
        reference=reference_config(info.logic, allowance).render(),
        context=context,
        family=info.logic,
        features={
            "kind": "solver",
            "family": info.logic,
            "logic": info.logic,
            "n_asserts": info.n_asserts,
            "n_decls": info.n_decls,
            "has_nonlinear": info.has_nonlinear,
            "uses_bitvectors": info.uses_bitvectors,
            "quantified": info.quantified,
            "size_chars": info.size,
            "max_rlimit": allowance,
            "category": info.category,
        },
        meta={"path": info.path, "status": info.status, **(meta or {})},
    )


@dataclass
class _Parsed:
    path: Path
    root: Path  # the folder scanned: labels, logic folders and task-id hashes are relative to it
    info: SmtFile
    digest: str
    label: str | None


def _group_files(root: Path, limit: int | None) -> list[Path]:
    """Every ``*.smt2`` under `root`, sorted; with `limit`, at most that many per top-level
    sub-folder (label folders count as `root` itself), alternating between label folders (so a
    sample has sat and unsat files)."""
    files = sorted(p for p in root.rglob("*.smt2") if not p.is_dir())
    if limit is None:
        return files
    groups: dict[str, list[Path]] = collections.defaultdict(list)
    for p in files:
        parts = p.relative_to(root).parts
        top = parts[0] if len(parts) > 1 else ""
        groups["" if top.lower() in LABELS else top].append(p)
    out: list[Path] = []
    for key in sorted(groups):
        out.extend(_interleave(groups[key])[: max(0, limit)])
    return out


def _interleave(files: list[Path]) -> list[Path]:
    """Round-robin over parent folders (so a `limit` samples both sat/ and unsat/)."""
    by_parent: dict[Path, list[Path]] = {}
    for p in files:
        by_parent.setdefault(p.parent, []).append(p)
    lists = [by_parent[k] for k in sorted(by_parent)]
    out: list[Path] = []
    for i in range(max((len(g) for g in lists), default=0)):
        out.extend(g[i] for g in lists if i < len(g))
    return out


def _read(files: list[tuple[Path, Path]], report: LoadReport | None) -> list[_Parsed]:
    parsed: list[_Parsed] = []
    refused: list[tuple[str, str]] = []
    for p, root in files:
        try:
            text = read_smtlib_text(p)
            info = parse_smtlib(text, str(p))
        except SmtLibError as exc:
            refused.append((str(p), str(exc)))
            continue
        folders = p.relative_to(root).parts[:-1]
        label = next((f.lower() for f in reversed(folders) if f.lower() in LABELS), None)
        parsed.append(_Parsed(p, root, info, digest_text(text), label))
        if report is not None:
            _notes(p, info, folders, label, report)
    if refused and report is None:
        raise SmtLibError(refused_message(refused, "SMT-LIB"))
    if report is not None:
        report.refused.extend(refused)
    return parsed


def _notes(
    path: Path, info: SmtFile, folders: tuple[str, ...], label: str | None, report: LoadReport
) -> None:
    """Folder names that contradict the header: a sat/unsat label, a logic folder."""
    if label and info.status in LABELS and info.status != label:
        report.disagreements.append(
            (str(path), f"folder label {label!r} contradicts the header's :status {info.status}")
        )
    elif label and info.status == "unknown":
        report.notes.append(
            (str(path), f"folder label {label!r}, header :status unknown (checked without one)")
        )
    logic_folders = [f for f in folders if f not in LABELS and is_logic_name(f) and f != "auto"]
    if logic_folders and logic_folders[-1] != info.logic:
        report.disagreements.append(
            (str(path), f"in folder {logic_folders[-1]!r} but the header says (set-logic {info.logic})")
        )


@functools.lru_cache(maxsize=1)
def _probe_evaluator() -> Any:
    """One evaluator (one worker process) for every probe of this process."""
    from cm_gym.domains.smt.evaluator import SmtEvaluator

    return SmtEvaluator(cpu_limit_s=CALIBRATION_CPU_S, time_limit_s=10 * CALIBRATION_CPU_S)


def _probe(items: list[_Parsed], budget: int) -> list[Probe]:
    """The reference configuration checked by the world model at `budget` rlimit units."""
    tasks = [smtlib_task(item.info, "probe", budget) for item in items]
    return probe_references(_probe_evaluator(), tasks, "rlimit_used")


def load_smtlib_tasks(
    logics: Iterable[str] | None = None,
    limit: int | None = None,
    root: str | Path | None = None,
    families: Iterable[str] | None = None,
    report: LoadReport | None = None,
) -> list[Task]:
    """SMT-LIB solver tasks (see the module docstring). `logics` (alias `families`) keeps the
    files whose header names one of them (default: the shipped three, or every logic under
    `root`); `limit` caps the files per top-level folder; `report` collects refused files, dropped
    tasks and folder/header disagreements instead of raising."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    chosen = list(logics if logics is not None else families if families is not None else [])
    if root is None:
        base = data_root() / "smt"
        wanted = chosen or list(LOGIC_DIRS)
        files = []
        for logic in wanted:
            if not (base / logic).is_dir():
                raise SmtLibError(f"{base / logic}: not a directory of SMT-LIB files")
            files.extend((p, base / logic) for p in _group_files(base / logic, limit))
        check = False
    else:
        base = Path(root)
        if not base.is_dir():
            raise SmtLibError(f"{base}: not a directory of SMT-LIB files")
        files, check = [(p, base) for p in _group_files(base, limit)], True
    parsed = _read(files, report)
    by_logic: dict[str, list[_Parsed]] = collections.defaultdict(list)
    for item in parsed:
        if not chosen or item.info.logic in chosen:
            by_logic[item.info.logic].append(item)
    # probes count rlimit units; one stopped by the CPU backstop is cached with that bound in its
    # key, one stopped by the wall-clock hang guard is never cached (`calibration`)
    cache = ProbeCache(
        "smt-reference", f"z3 {z3.get_version_string()} rlimit cpu{CALIBRATION_CPU_S:g}s core-default"
    )
    stems = collections.Counter((item.root, item.path.stem) for item in parsed)
    tasks: list[Task] = []
    for logic in sorted(by_logic):
        items = by_logic[logic]
        if logic in ALLOWANCE and not check:
            calibration = Calibration(logic, ALLOWANCE[logic], "declared")
        else:
            named = {str(item.path): item for item in items}
            calibration = calibrate(
                logic,
                [Instance(name, item.digest) for name, item in named.items()],
                lambda batch, budget, named=named: _probe([named[inst.name] for inst in batch], budget),
                cache,
                declared=ALLOWANCE.get(logic),
                cap=CALIBRATION_CAP,
                margin=CALIBRATION_MARGIN,
                floor=ALLOWANCE_FLOOR,
                ceiling=MAX_RLIMIT,
                unit="rlimit units",
            )
        tasks.extend(_logic_tasks(items, calibration, stems, report))
    logger.debug("loaded %d SMT-LIB tasks from %s", len(tasks), base)
    return tasks


def _logic_tasks(
    items: list[_Parsed],
    calibration: Calibration,
    stems: collections.Counter[tuple[Path, str]],
    report: LoadReport | None,
) -> list[Task]:
    dropped = calibration.dropped
    tasks = []
    for item in items:
        probe = calibration.probes.get(str(item.path))
        status = item.info.status
        if (
            report is not None
            and probe
            and probe.verdict in LABELS
            and status in LABELS
            and probe.verdict != status
        ):
            report.disagreements.append(
                (str(item.path), f"z3 answers {probe.verdict}, the header says {status}")
            )
        if str(item.path) in dropped:
            continue
        task_id = f"smtlib-{item.info.logic}-{item.path.stem}"
        if stems[item.root, item.path.stem] > 1:  # same name in two folders: a hash not revealing which
            rel = item.path.relative_to(item.root).as_posix()
            task_id += "-" + hashlib.blake2b(rel.encode(), digest_size=3).hexdigest()
        meta = {"sha256": item.digest, **({"label": item.label} if item.label else {})}
        tasks.append(smtlib_task(item.info, task_id, calibration.allowance, meta))
    if report is not None:
        if calibration.probes:
            report.notes.append((f"logic {calibration.family}", calibration.describe("rlimit units")))
        report.dropped.extend(dropped.items())
        report.family_of.update(dict.fromkeys(dropped, calibration.family))
        report.unverified.extend(calibration.unverified.items())
    if dropped:
        logger.warning(
            "SMTLIB logic %s: dropped %d of %d task(s) whose reference does not decide within the "
            "allowance of %d rlimit units (cm-gym data check lists them)",
            calibration.family,
            len(dropped),
            len(items),
            calibration.allowance,
        )
    return tasks
