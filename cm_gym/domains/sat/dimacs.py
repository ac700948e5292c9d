"""DIMACS CNF reading (SATLIB layout: comments, ``p cnf`` header, ``%`` trailer).

`read_dimacs(path)` returns a `Cnf` or raises one `DimacsError` naming the file. What a parsed
formula may cost is bounded: the file size, the variable count and the literal count are capped,
only regular files are read (a FIFO or a device is refused, never waited on), and repeated
literals inside a clause and repeated clauses are removed (they change no model), so a file that
repeats one clause a million times costs the solver one clause.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from cm_gym.core.paths import DataFileError, read_data_file
from cm_gym.domains.sat.errors import DimacsError

MAX_FILE_BYTES = 20_000_000
MAX_VARS = 2_000_000
#: literals after removing repeats (each costs the solver memory; SATLIB instances have < 10^4)
MAX_LITERALS = 3_000_000

_HEADER = re.compile(r"p\s+cnf\s+(\d+)\s+(\d+)\s*")


@dataclass(frozen=True, eq=False)
class Cnf:
    """A parsed CNF: the literals as one flat int array with 0 after each clause, the header's
    variable count, and the comments (kept for the families' descriptions)."""

    path: str
    n_vars: int
    flat: np.ndarray
    comments: tuple[str, ...] = ()
    duplicates: int = 0  # clauses removed because an identical clause came earlier

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
                return _bounded(Cnf(name, n_vars, lits, comments))
    return _bounded(_parse_lines(text, name))


def _bounded(cnf: Cnf) -> Cnf:
    """`cnf` without repeated literals inside a clause and without repeated clauses (first
    occurrences kept, in file order, literal order unchanged), refused when still over
    `MAX_LITERALS`. Vectorised: a few sorts per file, nothing rebuilt when nothing repeats."""
    flat = cnf.flat
    ends = np.flatnonzero(flat == 0)
    if ends.size == 0:
        return cnf
    lengths = np.diff(ends, prepend=-1) - 1
    if _no_repeats(flat, ends, lengths):
        return _capped(cnf)
    clause_of = np.repeat(np.arange(ends.size, dtype=np.int64), lengths)
    lits = flat[flat != 0]
    order = np.lexsort((lits, clause_of))
    s_lits, s_of = lits[order], clause_of[order]
    repeat = (s_lits[1:] == s_lits[:-1]) & (s_of[1:] == s_of[:-1])
    if repeat.any():  # keep the first occurrence (in file order) of each literal of a clause
        drop = np.zeros(lits.size, dtype=bool)
        first = np.ones(lits.size, dtype=bool)
        first[1:] = ~repeat
        # within a run of equal (clause, literal), lexsort is stable: the run's head came first
        drop[order[~first]] = True
        lits, clause_of = lits[~drop], clause_of[~drop]
        lengths = np.bincount(clause_of, minlength=ends.size)
        order = np.lexsort((lits, clause_of))
        s_lits = lits[order]
    keep_clause = np.ones(ends.size, dtype=bool)
    starts = np.cumsum(lengths) - lengths
    for width in np.unique(lengths):
        ids = np.flatnonzero(lengths == width)
        if ids.size < 2:
            continue
        if width == 0:
            keep_clause[ids[1:]] = False
            continue
        rows = s_lits[starts[ids][:, None] + np.arange(width)]
        row_order = np.lexsort(rows.T[::-1])
        same = np.all(rows[row_order[1:]] == rows[row_order[:-1]], axis=1)
        if same.any():
            # among equal rows keep the one that comes first in the file
            group = np.concatenate(([0], np.cumsum(~same)))
            head = np.full(group[-1] + 1, ids.size, dtype=np.int64)
            np.minimum.at(head, group, row_order)
            keep_clause[ids] = False
            keep_clause[ids[head]] = True
    duplicates = int(ends.size - np.count_nonzero(keep_clause))
    if duplicates or lits.size != int(np.count_nonzero(flat)):
        kept = keep_clause[clause_of]
        widths = lengths[keep_clause]
        out = np.zeros(int(widths.sum()) + widths.size, dtype=np.int64)
        mask = np.ones(out.size, dtype=bool)
        mask[np.cumsum(widths + 1) - 1] = False
        out[mask] = lits[kept]
        cnf = replace(cnf, flat=out, duplicates=duplicates)
    return _capped(cnf)


def _no_repeats(flat: np.ndarray, ends: np.ndarray, lengths: np.ndarray) -> bool:
    """Fast proof that nothing repeats when every clause has the same width (random k-SAT and
    most generated families); False means "look closer", not "repeats"."""
    width = int(lengths[0])
    if width == 0 or not np.all(lengths == width):
        return False
    rows = np.sort(flat.reshape(ends.size, width + 1)[:, :width], axis=1)
    if width > 1 and np.any(rows[:, 1:] == rows[:, :-1]):
        return False
    rows = rows[np.lexsort(rows.T[::-1])]
    return not np.any(np.all(rows[1:] == rows[:-1], axis=1))


def _capped(cnf: Cnf) -> Cnf:
    n_lits = int(np.count_nonzero(cnf.flat))
    if n_lits > MAX_LITERALS:
        raise DimacsError(
            f"{cnf.path}: {n_lits} literals (after removing repeats) exceed the limit of {MAX_LITERALS}"
        )
    return cnf


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
    """Read and parse one DIMACS file (a `DimacsError` naming it when missing, not a regular file,
    huge or malformed)."""
    return parse_dimacs(read_dimacs_text(path), str(path))


def read_dimacs_text(path: str | Path) -> str:
    """The text of a DIMACS file (regular files only, at most `MAX_FILE_BYTES`)."""
    try:
        return read_data_file(path, MAX_FILE_BYTES)
    except DataFileError as exc:
        raise DimacsError(f"cannot read DIMACS file {exc}") from None


def file_state(path: str) -> tuple[int, int] | None:
    """(size, modification time in ns) of a file, or None when it cannot be stat'ed: what the
    per-process caches of parsed files are keyed by besides the path, so that a file rewritten in
    place is read again."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_size, st.st_mtime_ns


def cached_cnf(path: str) -> Cnf:
    """`read_dimacs` with a small per-process cache keyed by the file's path and state
    (`file_state`): the evaluator re-checks the same files, and sees a rewritten one anew."""
    return _cnf_at(path, file_state(path))


@lru_cache(maxsize=256)
def _cnf_at(path: str, state: tuple[int, int] | None) -> Cnf:
    return read_dimacs(path)
