"""SMT-LIB logic names: which names a configuration accepts and which z3 solver each one gets.

Every SMT-LIB logic name is accepted: the names of the SMT-LIB catalogue follow one grammar
(an optional ``QF_`` prefix, then array, uninterpreted-function, bit-vector, floating-point,
datatype and string theories, then an arithmetic fragment), so a name is recognised by that grammar
or by z3 itself (z3 has a few of its own, such as ``HORN`` or ``QF_FD``). A recognised name is
mapped to z3's ``SolverFor(name)`` when z3 has a solver for it, else to z3's default solver
(``auto``); the configuration keeps the name as written, so a task's reference always parses.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: the grammar of SMT-LIB logic names (https://smtlib.cs.uiowa.edu/logics.shtml): QF_ prefix,
#: arrays (A / AX), UF, BV, FP, DT, strings (S), then an arithmetic fragment
_GRAMMAR = re.compile(
    r"(QF_)?(AX|A)?(UF)?(BV)?(FP)?(DT)?(S)?(IDL|RDL|LIA|LRA|LIRA|NIA|NRA|NIRA)?",
)
#: whole names outside the grammar that SMT-LIB or z3 use
_SPECIAL = ("ALL", "QF_ALL", "HORN", "QF_FD", "SMTFD", "QF_SEQ")


@lru_cache(maxsize=512)
def z3_has_logic(name: str) -> bool:
    """True when z3's `SolverFor(name)` knows the logic (z3 refuses names it does not know)."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    try:
        z3.SolverFor(name, ctx=z3.Context())
    except z3.Z3Exception:
        return False
    return True


@lru_cache(maxsize=512)
def is_logic_name(name: str) -> bool:
    """True for "auto", every name of the SMT-LIB logic grammar and every logic z3 knows."""
    if name == "auto" or name in _SPECIAL:
        return True
    m = _GRAMMAR.fullmatch(name)
    if m is not None and any(m.groups()[1:]):
        return True
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]{0,31}", name)) and z3_has_logic(name)


def solver_logic(name: str) -> str:
    """The logic z3 is asked for: `name` when z3 has a solver for it, else "auto"."""
    if name == "auto" or not z3_has_logic(name):
        return "auto"
    return name


def has_quantifiers(name: str) -> bool:
    """True for a logic without the ``QF_`` prefix (its formulas may contain quantifiers)."""
    return name not in ("auto",) and not name.startswith("QF_")
