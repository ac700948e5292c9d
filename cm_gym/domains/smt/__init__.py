"""SMT domain plugin: benchmarks "SMT" (generated SMT-LIB encoding tasks) and "SMTLIB" (z3
configurations on SMT-LIB benchmarks: QF_LIA / QF_LRA / QF_BV under ``data_root()/"smt"`` by
default, any folder of ``.smt2`` files in any logic with ``--data DIR`` / ``gym.make(..., data=DIR)``)."""

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
