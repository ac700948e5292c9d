"""A corpus of hostile DIMACS inputs (our own writing) for testing the SAT world model's bounds.

`TEXTS` are file contents a dataset could hold, each with its class and the expected
containment: "refused" (one `DimacsError` naming the file) or "bounded" (read, but what the solver
gets stays small: repeats removed). `SPECIAL_FILES` are things named like DIMACS files that are
not regular files (a FIFO, a device), made by `make_special`: reading them must neither block nor
stream forever. `hard_instance` is a random 3-SAT formula at the satisfiability threshold, whose
solve takes longer than a short wall-clock bound: the checking worker must stop it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class HostileDimacs:
    """One probe: its class, its name, the file text, and the expected containment."""

    name: str
    klass: str
    text: str
    expect: str  # "refused" | "bounded"


TEXTS: tuple[HostileDimacs, ...] = (
    HostileDimacs(
        "one-clause-repeated", "duplicates", "p cnf 3 400000\n" + "1 -2 3 0\n" * 400_000, "bounded"
    ),
    HostileDimacs("repeated-literals", "duplicates", "p cnf 2 1\n" + "1 " * 500_000 + "-2 0\n", "bounded"),
    HostileDimacs("huge-header", "size", "p cnf 4000000000 1\n1 0\n", "refused"),
    HostileDimacs("literal-out-of-range", "malformed", "p cnf 3 1\n1 2 99999999999999999999 0\n", "refused"),
    HostileDimacs("clause-count-lies", "malformed", "p cnf 3 1000000\n1 2 0\n", "refused"),
    HostileDimacs("two-headers", "malformed", "p cnf 3 1\np cnf 3 1\n1 0\n", "refused"),
    HostileDimacs("no-header", "malformed", "1 2 3 0\n", "refused"),
    HostileDimacs("binary-junk", "malformed", "p cnf 3 1\n1 \x00\x01\x02 0\n", "refused"),
    HostileDimacs("float-literal", "malformed", "p cnf 3 1\n1.5 2 0\n", "refused"),
)

SPECIAL_FILES = ("fifo", "device", "directory")


def make_special(kind: str, folder: Path) -> Path:
    """A non-regular file named ``<kind>.cnf`` in `folder` (a FIFO, a link to /dev/zero, a folder)."""
    path = folder / f"{kind}.cnf"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
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
