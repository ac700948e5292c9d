"""A corpus of hostile DIMACS inputs (our own writing) for testing the SAT world model's bounds.

`TEXTS` are file contents a dataset could hold, each with its class and the expected
containment: "refused" (one `DimacsError` naming the file) or "bounded" (read, but what the solver
gets stays small: repeats removed). `SPECIAL_FILES` are things named like DIMACS files that are
not regular files (a FIFO, a device), made by `make_special`: reading them must neither block nor
stream forever. (Malformed files are not here: the reader refused them before issue 14.) `hard_instance` is a random 3-SAT formula at the satisfiability threshold, whose
solve takes longer than a short wall-clock bound: the checking worker must stop it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class HostileDimacs:
    """One probe: its class, its name, the file text (built on demand at a `scale` of the full
    size; a test scales the reader's caps alike), the expected containment."""

    name: str
    klass: str
    build: Callable[[float], str]
    expect: str  # "refused" | "bounded"


def _unique_triples(scale: float = 1.0, n_vars: int = 200) -> str:
    """At full scale ~17 MB of (nearly all) distinct 3-literal clauses: 3.5 million literals,
    over the reader's cap of 3 million."""
    n_clauses = max(1, int(1_200_000 * scale))
    rng = np.random.default_rng(1)
    lits = rng.integers(1, n_vars + 1, size=(n_clauses, 3)) * rng.choice([-1, 1], size=(n_clauses, 3))
    body = "\n".join(f"{a} {b} {c} 0" for a, b, c in lits.tolist())
    return f"p cnf {n_vars} {n_clauses}\n{body}\n"


def _repeated_clause(scale: float = 1.0) -> str:
    copies = max(2, int(400_000 * scale))  # full scale: 3.6 MB of one clause
    return f"p cnf 3 {copies}\n" + "1 -2 3 0\n" * copies


def _repeated_literal(scale: float = 1.0) -> str:
    return "p cnf 2 1\n" + "1 " * max(2, int(500_000 * scale)) + "-2 0\n"


TEXTS: tuple[HostileDimacs, ...] = (
    HostileDimacs("one-clause-repeated", "duplicates", _repeated_clause, "bounded"),
    HostileDimacs("repeated-literals", "duplicates", _repeated_literal, "bounded"),
    HostileDimacs("huge-clause-set", "size", _unique_triples, "refused"),
)

SPECIAL_FILES = ("fifo", "device")


def make_special(kind: str, folder: Path) -> Path:
    """A non-regular file named ``<kind>.cnf`` in `folder` (a FIFO, or a link to /dev/zero)."""
    path = folder / f"{kind}.cnf"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


def hard_instance(n_vars: int = 350, seed: int = 7) -> str:
    """Uniform random 3-SAT at clause/variable ratio 4.26 (hard for every CDCL solver)."""
    rng = np.random.default_rng(seed)
    n_clauses = int(round(4.26 * n_vars))
    lines = [f"p cnf {n_vars} {n_clauses}"]
    for _ in range(n_clauses):
        vs = rng.choice(np.arange(1, n_vars + 1), size=3, replace=False)
        signs = rng.choice([-1, 1], size=3)
        lines.append(" ".join(str(int(v * s)) for v, s in zip(vs, signs, strict=True)) + " 0")
    return "\n".join(lines) + "\n"
