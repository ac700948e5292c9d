"""DIMACS CNF reading (SATLIB layout: comments, ``p cnf`` header, ``%`` trailer) and SATLIB tasks.

`read_dimacs(path)` returns a `Cnf` or raises one `DimacsError` naming the file. `load_satlib_tasks`
turns every ``*.cnf`` of the family folders under ``data_root()/"sat"`` into a solver-action task
(benchmark "SATLIB"); each family has a conflict allowance the task states, and a reference
configuration that decides every instance of the family within it (checked by the bench script).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from cm_gym.domains.sat.errors import DimacsError
from cm_gym.domains.sat.solver import SolverConfig
from cm_gym.paths import data_root
from cm_gym.types import Task

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 20_000_000
MAX_VARS = 2_000_000

_HEADER = re.compile(r"p\s+cnf\s+(\d+)\s+(\d+)\s*")


@dataclass(frozen=True, eq=False)
class Cnf:
    """A parsed CNF: the literals as one flat int array with 0 after each clause, the header's
    variable count, and the comments (kept for the families' descriptions)."""

    path: str
    n_vars: int
    flat: np.ndarray
    comments: tuple[str, ...] = ()

    @property
    def n_clauses(self) -> int:
        """Number of clauses."""
        return int(np.count_nonzero(self.flat == 0))

    @property
    def max_width(self) -> int:
        """Length of the longest clause."""
        ends = np.flatnonzero(self.flat == 0)
        return int(np.max(np.diff(np.concatenate(([-1], ends))) - 1)) if ends.size else 0

    def clauses(self) -> list[list[int]]:
        """The clauses as lists of signed ints (what python-sat takes)."""
        out: list[list[int]] = []
        current: list[int] = []
        for lit in self.flat.tolist():
            if lit == 0:
                out.append(current)
                current = []
            else:
                current.append(lit)
        return out


_COMMENT = re.compile(r"^[ \t]*c.*$", re.M)
_TRAILER = re.compile(r"^[ \t]*%", re.M)
_HEADER_LINE = re.compile(r"^[ \t]*p[ \t]+cnf[ \t]+(\d+)[ \t]+(\d+)[ \t]*$", re.M)


def _fast_ints(text: str) -> np.ndarray | None:
    """All whitespace-separated integers of `text`, or None when anything else is in it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            arr = np.fromstring(text, dtype=np.int64, sep=" ")  # noqa: NPY201 - text mode is supported
        except (ValueError, DeprecationWarning):
            return None
    return arr if arr.size == len(text.split()) else None


def parse_dimacs(text: str, name: str = "<string>") -> Cnf:
    """Parse DIMACS CNF text: ``c`` comments, one ``p cnf V C`` header, clauses spanning lines, a
    last clause without its ``0`` and a ``%`` trailer (everything after it is ignored). A fast
    vectorised path handles well-formed files; anything irregular goes to the line-by-line parser,
    which raises a `DimacsError` naming the file and line."""
    cut = _TRAILER.search(text)
    body = text[: cut.start()] if cut else text
    headers = list(_HEADER_LINE.finditer(body))
    if len(headers) == 1 and not _COMMENT.sub("", body[: headers[0].start()]).strip():
        n_vars, n_clauses = int(headers[0].group(1)), int(headers[0].group(2))
        lits = _fast_ints(_COMMENT.sub("", body[headers[0].end() :]))
        if lits is not None and n_vars <= MAX_VARS and (lits.size == 0 or int(np.abs(lits).max()) <= n_vars):
            if lits.size and lits[-1] != 0:
                lits = np.append(lits, 0)
            if int(np.count_nonzero(lits == 0)) == n_clauses:
                comments = tuple(m.group(0).strip()[1:].strip() for m in _COMMENT.finditer(body))
                return Cnf(name, n_vars, lits, comments)
    return _parse_lines(text, name)


def _parse_lines(text: str, name: str) -> Cnf:
    """Parse DIMACS CNF text line by line. Accepts ``c`` comments, one ``p cnf V C`` header, clauses spanning
    lines, a last clause without its ``0`` and a ``%`` trailer (everything after it is ignored)."""
    n_vars = n_clauses = -1
    comments: list[str] = []
    clauses: list[tuple[int, ...]] = []
    current: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "c":
            comments.append(line[1:].strip())
            continue
        if line[0] == "%":
            break
        if line[0] == "p":
            if n_vars >= 0:
                raise DimacsError(f"{name}: line {number}: a second 'p' header")
            m = _HEADER.fullmatch(line)
            if m is None:
                raise DimacsError(f"{name}: line {number}: malformed header {line[:40]!r} (want 'p cnf V C')")
            n_vars, n_clauses = int(m.group(1)), int(m.group(2))
            if n_vars > MAX_VARS:
                raise DimacsError(f"{name}: {n_vars} variables exceed the limit of {MAX_VARS}")
            continue
        if n_vars < 0:
            raise DimacsError(f"{name}: line {number}: clause before the 'p cnf' header")
        try:
            lits = [int(tok) for tok in line.split()]
        except ValueError:
            raise DimacsError(f"{name}: line {number}: not a clause line: {line[:40]!r}") from None
        for lit in lits:
            if lit == 0:
                clauses.append(tuple(current))
                current = []
            elif abs(lit) > n_vars:
                raise DimacsError(
                    f"{name}: line {number}: literal {lit} exceeds the {n_vars} declared variables"
                )
            else:
                current.append(lit)
    if n_vars < 0:
        raise DimacsError(f"{name}: no 'p cnf' header")
    if current:
        clauses.append(tuple(current))
    if len(clauses) != n_clauses:
        raise DimacsError(f"{name}: header declares {n_clauses} clauses but the file has {len(clauses)}")
    flat = [lit for clause in clauses for lit in (*clause, 0)]
    return Cnf(name, n_vars, np.asarray(flat, dtype=np.int64), tuple(comments))


def read_dimacs(path: str | Path) -> Cnf:
    """Read and parse one DIMACS file (a `DimacsError` naming it when missing, huge or malformed)."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise DimacsError(f"{p}: cannot read DIMACS file ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise DimacsError(f"{p}: {size} bytes exceed the limit of {MAX_FILE_BYTES}")
    try:
        text = p.read_text(encoding="utf-8", errors="strict")
    except (OSError, UnicodeDecodeError) as exc:
        raise DimacsError(f"{p}: cannot read DIMACS file ({exc})") from None
    return parse_dimacs(text, str(p))


@lru_cache(maxsize=256)
def cached_cnf(path: str) -> Cnf:
    """`read_dimacs` with a small per-process cache (the evaluator re-checks the same files)."""
    return read_dimacs(path)


@dataclass(frozen=True)
class FamilyInfo:
    """What a SATLIB family is and the conflict allowance its tasks state."""

    description: str
    allowance: int


FAMILIES: dict[str, FamilyInfo] = {
    "uf20-91": FamilyInfo("uniform random 3-SAT, 20 variables, 91 clauses (satisfiable)", 12),
    "uf50-218": FamilyInfo("uniform random 3-SAT, 50 variables, 218 clauses (satisfiable)", 130),
    "uuf50-218": FamilyInfo("uniform random 3-SAT, 50 variables, 218 clauses (unsatisfiable)", 150),
    "flat30-60": FamilyInfo("flat graph 3-colouring, 30 vertices, 60 edges (satisfiable)", 50),
    "flat100-239": FamilyInfo("flat graph 3-colouring, 100 vertices, 239 edges (satisfiable)", 50),
}
DEFAULT_ALLOWANCE = 200
REFERENCE_SOLVER = "maplecm"


def family_info(name: str) -> FamilyInfo:
    """The family's description and allowance (unknown folders get a generic one)."""
    return FAMILIES.get(name, FamilyInfo(f"DIMACS CNF instances from folder {name}", DEFAULT_ALLOWANCE))


def _natural(path: Path) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def satlib_task(cnf: Cnf, fam: str, path: Path) -> Task:
    """The solver-action task for one parsed instance of family `fam`."""
    info = family_info(fam)
    ratio = round(cnf.n_clauses / max(1, cnf.n_vars), 3)
    reference = SolverConfig(REFERENCE_SOLVER, "default", False, info.allowance).render()
    prompt = (
        f"Decide the CNF formula {path.name} (SATLIB family {fam}: {info.description}) with a python-sat "
        f"solver within a budget of at most {info.allowance} conflicts. Answer with a solver configuration."
    )
    context = (
        f"formula: {path.name}\nfamily: {fam}\nvariables: {cnf.n_vars}\nclauses: {cnf.n_clauses}\n"
        f"clause/variable ratio: {ratio}\nconflict allowance: {info.allowance}\n\n"
        "Configuration: 'key: value' lines. solver: one of maplecm, minisat22, glucose4, glucose42, "
        "glucose3, mergesat3, cadical195, cadical153, maplesat, minicard, gluecard4, maplechrono. "
        "phase: default | true | false. preprocess: off | on. budget: conflicts (at most the allowance). "
        "Solved = a verified model or an UNSAT answer within the budget."
    )
    return Task(
        task_id=f"satlib-{fam}-{path.stem}",
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
            "max_budget": info.allowance,
            "clause_width": cnf.max_width,
        },
        meta={"path": str(path)},
    )


def load_dimacs_dir(folder: str | Path, fam: str | None = None, limit: int | None = None) -> list[Task]:
    """Tasks for the ``*.cnf`` files of one folder (natural order; every file fully parsed, so a
    malformed one is a `DimacsError` naming it)."""
    root = Path(folder)
    if not root.is_dir():
        raise DimacsError(f"{root}: not a directory of DIMACS files")
    files = sorted((p for p in root.iterdir() if p.suffix == ".cnf" and p.is_file()), key=_natural)
    if limit is not None:
        files = files[: max(0, limit)]
    name = fam or root.name
    return [satlib_task(read_dimacs(p), name, p) for p in files]


def load_satlib_tasks(
    families: Iterable[str] | None = None, limit: int | None = None, root: str | Path | None = None
) -> list[Task]:
    """SATLIB solver-action tasks from ``data_root()/"sat"`` (all five families by default;
    `limit` caps the files read per family)."""
    base = Path(root) if root is not None else data_root() / "sat"
    names: Sequence[str] = list(families) if families is not None else list(FAMILIES)
    tasks: list[Task] = []
    for fam in names:
        tasks.extend(load_dimacs_dir(base / fam, fam, limit))
    logger.debug("loaded %d SATLIB tasks from %s", len(tasks), base)
    return tasks
