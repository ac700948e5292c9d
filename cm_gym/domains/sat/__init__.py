"""SAT domain plugin: benchmarks "SAT" (generated encoding tasks) and "SATLIB" (solver
configurations on SATLIB DIMACS instances under ``data_root()/"sat"``, or any DIMACS folder with
``--data DIR`` / ``gym.make(..., data=DIR)``)."""

from __future__ import annotations

from cm_gym.domains.registry import register_benchmark
from cm_gym.domains.sat.domain import SatDomain
from cm_gym.domains.sat.generated import generate_encoding_tasks
from cm_gym.domains.sat.loader import load_satlib_tasks

__all__ = ["SatDomain", "generate_encoding_tasks", "load_satlib_tasks"]

register_benchmark(
    "SAT",
    domain=SatDomain,
    load_tasks=generate_encoding_tasks,
    description="Generated SAT encoding tasks (colouring, pigeonhole, queens, scheduling and look-alikes)",
)
register_benchmark(
    "SATLIB",
    domain=SatDomain,
    load_tasks=load_satlib_tasks,
    description="Solver configurations on SATLIB uf20/uf50/uuf50/flat DIMACS instances (real data)",
    split_by_env=False,
    data_layout="DIMACS CNF files (*.cnf, *.dimacs): one sub-folder per family, or the files themselves",
)
