"""Math domain: formal proofs of miniF2F statements with Coq as the world model. Registers
"MiniF2F" (``cm_gym/MiniF2F-v0``) on the miniF2F-rocq "valid" statements
(``data_root()/"minif2f-rocq"/"valid"``) that the portfolio search proved (the shipped table);
``load_minif2f_tasks(proved_only=False)`` gives every statement, for real LLMs. Registration and
task loading work without Coq; creating an evaluator raises `ToolNotFoundError` with the install
command (``apt-get install -y coq``) when ``coqc`` is missing."""

from __future__ import annotations

from pathlib import Path

from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.math.domain import MathDomain
from cm_gym.domains.registry import register_benchmark

__all__ = ["MathDomain", "load_minif2f_tasks"]


def load_minif2f_tasks(
    root: Path | str | None = None,
    *,
    proved_only: bool = True,
    limit: int | None = None,
    report: LoadReport | None = None,
) -> list[Task]:
    """miniF2F-rocq tasks (see `cm_gym.domains.math.loader`)."""
    from cm_gym.domains.math.loader import load_minif2f_tasks as load

    return load(root=root, proved_only=proved_only, limit=limit, report=report)


register_benchmark(
    "MiniF2F",
    domain=MathDomain,
    load_tasks=load_minif2f_tasks,
    description="miniF2F valid statements in Coq (stdlib); write a proof script that coqc accepts at Qed",
    # a bare gym.make builds its default store on 16 of the 25 build tasks: about 90 s here on 2
    # shared cores (`cm-gym build --benchmark MiniF2F` builds on the whole split)
    default_n_build=16,
    data_layout="Coq files (*.v), one theorem each, proof Admitted (miniF2F-rocq; or minif2f-rocq/valid/ below "
    "the folder); the benchmark keeps the statements the shipped portfolio table proves",
)
