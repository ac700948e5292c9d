"""SMT-LIB v2 benchmark files: logic, ``:status`` and structure counts from the header and body.

`read_smtlib(path)` parses one ``.smt2`` file (balanced s-expressions, a ``set-logic``, at most one
``check-sat``, no ``push``/``pop``) or raises one `SmtLibError` naming the file. The status is
"sat", "unsat" or "unknown" (also when the header has none: SMT-LIB's own meaning of a missing
status). Only regular files are read. The tasks built from these files are in `loader.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cm_gym.core.paths import DataFileError, read_data_file
from cm_gym.domains.smt.errors import SexprError, SmtLibError
from cm_gym.domains.smt.sexpr import Sexpr, atoms, parse_sexprs

MAX_FILE_BYTES = 2_000_000
STATUSES = ("sat", "unsat", "unknown")


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
    quantified: bool = False


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
    n_asserts = n_decls = n_checks = 0
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
        elif head == "check-sat":
            n_checks += 1
        elif head in ("push", "pop", "check-sat-assuming", "reset", "reset-assertions"):
            raise SmtLibError(
                f"{name}: line {cmd.line}: ({head} ...): incremental benchmarks are not supported"
            )
    if not logic:
        raise SmtLibError(f"{name}: no (set-logic ...) in the header")
    if n_checks > 1:
        raise SmtLibError(
            f"{name}: {n_checks} (check-sat) commands: incremental benchmarks are not supported"
        )
    status = status or "unknown"
    if status not in STATUSES:
        raise SmtLibError(f"{name}: (set-info :status {status}) is not one of sat, unsat, unknown")
    uses_bv = "BV" in logic or any(
        a.startswith(("bv", "#x", "#b")) or a == "BitVec" for e in asserted for a in atoms(e)
    )
    quantified = any(a in ("forall", "exists") for e in asserted for a in atoms(e))
    return SmtFile(
        name,
        logic,
        status,
        n_asserts,
        n_decls,
        has_nonlinear(asserted),
        uses_bv,
        category,
        len(text),
        quantified,
    )


def read_smtlib_text(path: str | Path) -> str:
    """The text of an SMT-LIB file (regular files only, at most `MAX_FILE_BYTES`)."""
    try:
        return read_data_file(path, MAX_FILE_BYTES)
    except DataFileError as exc:
        raise SmtLibError(f"cannot read SMT-LIB file {exc}") from None


def read_smtlib(path: str | Path) -> SmtFile:
    """Read and parse one ``.smt2`` file (a `SmtLibError` naming it when missing or malformed)."""
    return parse_smtlib(read_smtlib_text(path), str(path))


@lru_cache(maxsize=256)
def file_text(path: str) -> str:
    """The text of a benchmark file (cached; the evaluator re-checks the same files)."""
    return read_smtlib_text(path)
