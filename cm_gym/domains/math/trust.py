"""What a Coq proof may rely on: the fixed list of libraries it may load and the fully qualified
axioms it may use. Nothing here is inferred from a module's name or computed at run time.

- `ALLOWED_AXIOMS` — the classical axioms of Coq 8.16's standard library that are consistent
  together (they all hold in the set-theoretic model of CIC with a predicative ``Set``): excluded
  middle, functional and propositional extensionality, proof irrelevance and UIP, the description
  and choice principles, extensionality of ensembles, and the two axioms the reals of 8.16 are built
  on (``ClassicalDedekindReals.sig_forall_dec`` / ``sig_not_dec``). The 62 portfolio proofs of the
  miniF2F statements use four of them (``sig_forall_dec``, ``sig_not_dec``,
  ``functional_extensionality_dep``, ``classic``). ``Coq.Compat.AdmitAxiom.proof_admitted``
  (``False``), the primitive-float and primitive-integer specifications and every axiom a module
  type declares are not on it.
- `allowed_libraries()` — the standard-library modules a script (or a statement) may ``Require``,
  read from ``data/allowed_libraries.txt`` (one fully qualified name a line; its header says how
  the list was written). A name is checked after it is resolved to its one full name.

The axioms a statement declares itself (``Axiom``/``Parameter`` … in its own file) are allowed
too, but only under the statement file's own library name (`STATEMENT_LIBRARY`), never by their
short name alone.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

_IDENT = re.compile(r"[^\W\d][\w']*")
LIBRARIES_FILE = Path(__file__).parent / "data" / "allowed_libraries.txt"
#: the logical name of the file the checker writes (``task.v``): statement axioms live under it
STATEMENT_LIBRARY = "task"

ALLOWED_AXIOMS: tuple[str, ...] = (
    "Coq.Logic.Classical_Prop.classic",
    "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep",
    "Coq.Logic.PropExtensionality.propositional_extensionality",
    "Coq.Logic.ProofIrrelevance.proof_irrelevance",
    "Coq.Logic.Eqdep.Eq_rect_eq.eq_rect_eq",
    "Coq.Logic.IndefiniteDescription.constructive_indefinite_description",
    "Coq.Logic.ClassicalEpsilon.constructive_indefinite_description",
    "Coq.Logic.Description.constructive_definite_description",
    "Coq.Logic.ClassicalUniqueChoice.dependent_unique_choice",
    "Coq.Logic.RelationalChoice.relational_choice",
    "Coq.Logic.Epsilon.epsilon_statement",
    "Coq.Sets.Ensembles.Extensionality_Ensembles",
    "Coq.Reals.ClassicalDedekindReals.sig_forall_dec",
    "Coq.Reals.ClassicalDedekindReals.sig_not_dec",
)


@functools.lru_cache(maxsize=1)
def allowed_libraries() -> frozenset[str]:
    """The fixed list of loadable standard-library modules (``Coq.micromega.Lia`` …)."""
    lines = LIBRARIES_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def library_allowed(full_name: str) -> bool:
    """Is the fully qualified module `full_name` on the fixed list?"""
    return full_name in allowed_libraries()


def statement_axioms(declared: tuple[str, ...]) -> tuple[str, ...]:
    """The fully qualified names of the axioms a statement declares (``task.<name>``; anything
    that is not a plain identifier is left out, so no name can change the check file)."""
    return tuple(f"{STATEMENT_LIBRARY}.{name}" for name in declared if _IDENT.fullmatch(name))
