"""SMT-LIB v2 benchmark files (``:status`` and logic from the header) and SMT-LIB solver tasks.

`read_smtlib(path)` parses one ``.smt2`` file (balanced s-expressions, a ``set-logic``, a
``(set-info :status sat|unsat)``) or raises one `SmtLibError` naming the file. `load_smtlib_tasks`
turns the files under ``data_root()/"smt"/<LOGIC>`` (any depth, e.g. ``sat/`` and ``unsat/``) into
solver-configuration tasks (benchmark "SMTLIB"); the status stays hidden in ``task.meta``.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cm_gym.domains.smt.errors import SexprError, SmtLibError
from cm_gym.domains.smt.sexpr import Sexpr, atoms, parse_sexprs
from cm_gym.domains.smt.solver import SmtConfig
from cm_gym.paths import data_root
from cm_gym.types import Task

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 2_000_000
LOGIC_DIRS = ("QF_LIA", "QF_LRA", "QF_BV")
#: the rlimit allowance a task states, and the reference configuration, per logic
ALLOWANCE = {"QF_LIA": 2_000_000, "QF_LRA": 100_000, "QF_BV": 2_000_000}
DEFAULT_ALLOWANCE = 2_000_000
REFERENCE_TACTIC = {"QF_LIA": "smt", "QF_LRA": "default", "QF_BV": "(then simplify smt)"}


@dataclass(frozen=True)
class SmtFile:
    """A parsed benchmark file's header facts and structure counts."""

    path: str
    logic: str
    status: str
    n_asserts: int
    n_decls: int
    has_nonlinear: bool
    uses_bitvectors: bool
    category: str
    size: int


def _is_numeral(e: Sexpr) -> bool:
    return isinstance(e, str) and bool(re.fullmatch(r"\d+(\.\d+)?|#x[0-9a-fA-F]+|#b[01]+", e))


def has_nonlinear(exprs: Iterable[Sexpr]) -> bool:
    """True when a product has two non-constant factors or a division/modulo a non-constant divisor."""
    todo = list(exprs)
    while todo:
        e = todo.pop()
        if isinstance(e, str):
            continue
        if e and e[0] in ("*", "bvmul") and sum(1 for a in e[1:] if not _is_constant(a)) >= 2:
            return True
        if (
            e
            and e[0] in ("/", "div", "mod", "bvudiv", "bvurem", "bvsdiv", "bvsrem")
            and len(e) > 2
            and not _is_constant(e[2])
        ):
            return True
        todo.extend(e)
    return False


def _is_constant(e: Sexpr) -> bool:
    """A numeral, an indexed bit-vector constant, or arithmetic over constants only."""
    if isinstance(e, str):
        return _is_numeral(e)
    if len(e) == 3 and e[0] == "_" and isinstance(e[1], str) and e[1].startswith("bv"):
        return True
    return bool(e) and e[0] in ("-", "+", "*", "/", "to_real") and all(_is_constant(a) for a in e[1:])


def parse_smtlib(text: str, name: str) -> SmtFile:
    """Header facts of SMT-LIB text; `SmtLibError` naming `name` when malformed."""
    try:
        commands = parse_sexprs(text, max_chars=MAX_FILE_BYTES, max_tokens=2_000_000)
    except SexprError as exc:
        raise SmtLibError(f"{name}: malformed SMT-LIB: {exc}") from None
    logic = status = category = ""
    n_asserts = n_decls = 0
    asserted: list[Sexpr] = []
    for cmd in commands:
        e = cmd.expr
        if not isinstance(e, list) or not e:
            raise SmtLibError(f"{name}: line {cmd.line}: expected a command")
        head = e[0]
        if head == "set-logic" and len(e) == 2 and isinstance(e[1], str):
            logic = e[1]
        elif head == "set-info" and len(e) >= 3 and e[1] == ":status" and isinstance(e[2], str):
            status = e[2]
        elif head == "set-info" and len(e) >= 3 and e[1] == ":category" and isinstance(e[2], str):
            category = e[2].strip('"')
        elif head in ("declare-fun", "declare-const"):
            n_decls += 1
        elif head == "assert":
            n_asserts += 1
            asserted.append(e)
    if not logic:
        raise SmtLibError(f"{name}: no (set-logic ...) in the header")
    if status not in ("sat", "unsat"):
        raise SmtLibError(f"{name}: header has no (set-info :status sat|unsat) (found {status or 'none'!r})")
    uses_bv = "BV" in logic or any(
        a.startswith(("bv", "#x", "#b")) or a == "BitVec" for e in asserted for a in atoms(e)
    )
    return SmtFile(
        name, logic, status, n_asserts, n_decls, has_nonlinear(asserted), uses_bv, category, len(text)
    )


def read_smtlib(path: str | Path) -> SmtFile:
    """Read and parse one ``.smt2`` file (a `SmtLibError` naming it when missing or malformed)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise SmtLibError(f"{p}: {p.stat().st_size} bytes exceed the limit of {MAX_FILE_BYTES}")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SmtLibError(f"{p}: cannot read SMT-LIB file ({exc})") from None
    return parse_smtlib(text, str(p))


@lru_cache(maxsize=256)
def file_text(path: str) -> str:
    """The text of a benchmark file (cached; the evaluator re-checks the same files)."""
    return Path(path).read_text(encoding="utf-8")


def reference_config(logic: str) -> SmtConfig:
    """The configuration that decides this logic's shipped benchmarks within the allowance."""
    return SmtConfig(logic, REFERENCE_TACTIC.get(logic, "default"), ALLOWANCE.get(logic, DEFAULT_ALLOWANCE))


def smtlib_task(info: SmtFile, task_id: str) -> Task:
    """The solver-configuration task for one benchmark file."""
    allowance = ALLOWANCE.get(info.logic, DEFAULT_ALLOWANCE)
    name = Path(info.path).name
    prompt = (
        f"Decide the SMT-LIB benchmark {name} (logic {info.logic}, {info.n_asserts} assertions over "
        f"{info.n_decls} declared symbols) with z3 within a resource limit of at most {allowance} "
        "rlimit units. Answer with a solver configuration."
    )
    context = (
        f"benchmark: {name}\nlogic: {info.logic}\ncategory: {info.category or 'unknown'}\n"
        f"assertions: {info.n_asserts}\ndeclarations: {info.n_decls}\n"
        f"non-linear terms: {'yes' if info.has_nonlinear else 'no'}\nrlimit allowance: {allowance}\n\n"
        "Configuration: 'key: value' lines. logic: auto or an SMT-LIB logic (z3 SolverFor); tactic: "
        "default, a z3 tactic (smt, simplify, qflia, qflra, qfbv, bit-blast, sat, ...) or (then ...) / "
        "(or-else ...) / (repeat ...); rlimit: z3 resource units, at most the allowance. "
        "Solved = the benchmark's status, with a sat model that satisfies every assertion."
    )
    return Task(
        task_id=task_id,
        domain="smt",
        prompt=prompt,
        env_id=f"smtlib/{info.logic}",
        reference=reference_config(info.logic).render(),
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
            "size_chars": info.size,
            "max_rlimit": allowance,
            "category": info.category,
        },
        meta={"path": info.path, "status": info.status},
    )


def load_smtlib_dir(folder: str | Path, limit: int | None = None, prefix: str = "smtlib") -> list[Task]:
    """Tasks for every ``*.smt2`` file under `folder` (sorted by path; every file parsed)."""
    root = Path(folder)
    if not root.is_dir():
        raise SmtLibError(f"{root}: not a directory of SMT-LIB files")
    files = sorted(p for p in root.rglob("*.smt2") if p.is_file())
    if limit is not None:
        files = _interleave(files, root)[: max(0, limit)]
    stems = collections.Counter(p.stem for p in files)
    tasks: list[Task] = []
    for p in files:
        info = read_smtlib(p)
        task_id = f"{prefix}-{info.logic}-{p.stem}"
        if stems[p.stem] > 1:  # same name in two sub-folders: a path hash that does not reveal which
            rel = p.relative_to(root).as_posix()
            task_id += "-" + hashlib.blake2b(rel.encode(), digest_size=3).hexdigest()
        tasks.append(smtlib_task(info, task_id))
    return tasks


def _interleave(files: list[Path], root: Path) -> list[Path]:
    """Round-robin over sub-folders (so a `limit` samples both sat/ and unsat/)."""
    groups: dict[Path, list[Path]] = {}
    for p in files:
        groups.setdefault(p.parent, []).append(p)
    out: list[Path] = []
    lists = [groups[k] for k in sorted(groups)]
    for i in range(max((len(g) for g in lists), default=0)):
        out.extend(g[i] for g in lists if i < len(g))
    return out


def load_smtlib_tasks(
    logics: Iterable[str] | None = None,
    limit: int | None = None,
    root: str | Path | None = None,
    families: Iterable[str] | None = None,
) -> list[Task]:
    """SMT-LIB solver tasks from ``data_root()/"smt"`` (QF_LIA, QF_LRA, QF_BV by default;
    `families` is an alias of `logics`; `limit` caps the files per logic, sampling sat/ and unsat/
    alternately)."""
    base = Path(root) if root is not None else data_root() / "smt"
    chosen = logics if logics is not None else families
    tasks: list[Task] = []
    for logic in list(chosen) if chosen is not None else list(LOGIC_DIRS):
        tasks.extend(load_smtlib_dir(base / logic, limit))
    logger.debug("loaded %d SMT-LIB tasks from %s", len(tasks), base)
    return tasks
