"""CodeHumanEval (``cm_gym/CodeHumanEval-v0``): OpenAI HumanEval's 164 problems, each shown as its
docstring plus the canonical solution with one systematically injected bug (HumanEvalFix's
classes, `inject.py`), tested by the problem's own ``check`` asserts turned into cases that the
judge compares outside the program's process (`checks.py`). Real data under
``data_root()/"humaneval"`` (never copied into the package)."""

from __future__ import annotations

from cm_gym.domains.humaneval.domain import HumanEvalDomain
from cm_gym.domains.humaneval.loader import LAYOUT, load_humaneval_tasks
from cm_gym.registry import register_benchmark

__all__ = ["HumanEvalDomain", "load_humaneval_tasks"]

register_benchmark(
    "CodeHumanEval",
    domain=HumanEvalDomain,
    load_tasks=load_humaneval_tasks,
    description="HumanEval problems with injected HumanEvalFix-class bugs; tests judged outside the sandbox (real data)",
    split_by_env=True,
    default_n_build=16,
    data_layout=LAYOUT,
)
