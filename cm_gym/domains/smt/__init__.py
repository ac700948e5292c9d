"""SMT domain plugin: benchmarks "SMT" (generated SMT-LIB encoding tasks) and "SMTLIB" (z3
configurations on SMT-LIB benchmarks: QF_LIA / QF_LRA / QF_BV under ``data_root()/"smt"`` by
default, any folder of ``.smt2`` files in any logic with ``--data DIR`` / ``gym.make(..., data=DIR)``).

z3 is imported inside the functions that call it, never at module level: the registry imports every
built-in domain at ``import cm_gym``, and z3 and python-sat cost every process 59 ms of CPU and
12,000 objects for the garbage collector, a SQL-only run included (issue 35; the SAT domain does the
same with python-sat's solvers and cardinality encodings). Annotations name z3 under
``TYPE_CHECKING``; an ``import`` of a loaded module is a dictionary lookup, and import is
thread-safe (unlike `importlib.util.LazyLoader` before Python 3.12.3, CPython gh-114763).
`tests/domains/test_solver_imports.py` checks that a SQL env never loads them."""

from __future__ import annotations

from cm_gym.domains.registry import register_benchmark
from cm_gym.domains.smt.domain import SmtDomain
from cm_gym.domains.smt.generated import generate_smt_tasks
from cm_gym.domains.smt.loader import load_smtlib_tasks

__all__ = ["SmtDomain", "generate_smt_tasks", "load_smtlib_tasks"]

register_benchmark(
    "SMT",
    domain=SmtDomain,
    load_tasks=generate_smt_tasks,
    description="Generated SMT-LIB encoding tasks (bounds, integrality, meetings, digits, bit-vectors)",
)
register_benchmark(
    "SMTLIB",
    domain=SmtDomain,
    load_tasks=load_smtlib_tasks,
    description="z3 configurations on SMT-LIB benchmarks (QF_LIA/QF_LRA/QF_BV by default; any logic with --data)",
    data_layout="SMT-LIB v2 files (*.smt2) in any logic, at any depth (e.g. <LOGIC>/sat/, <LOGIC>/unsat/)",
)
