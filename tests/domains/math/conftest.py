"""Math test fixtures: an evaluator (needs ``coqc``: skipped with a clear reason outside CI, a
failure in CI) with short limits, and synthetic tasks written here (no data needed)."""

from __future__ import annotations

import os

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.math.evaluator import MathEvaluator
from cm_gym.domains.math.features import statement_features
from cm_gym.domains.math.statement import parse_statement
from cm_gym.evaluators.sandbox import Limits, ToolNotFoundError

#: the CPU-time budget is the limit (issue 25); wall clock is only a hang guard, far above it
TEST_LIMITS = Limits(
    wall_s=600.0, cpu_s=40.0, memory_mb=2048, max_procs=16, max_file_mb=16, output_chars=200_000
)


def make_evaluator(**kwargs: object) -> MathEvaluator:
    try:
        return MathEvaluator(**{"limits": TEST_LIMITS, "cache": None, **kwargs})  # type: ignore[arg-type]
    except ToolNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"coqc is missing in CI: {exc}")
        pytest.skip(f"coqc is not installed: {exc}")


@pytest.fixture(scope="module")
def evaluator() -> MathEvaluator:
    return make_evaluator()


def synthetic_task(text: str, name: str = "t", reference: str = "") -> Task:
    """A math task from statement text written in the test."""
    st = parse_statement(text, name)
    return Task(f"synthetic-{name}", "math", st.source, "synthetic", reference,
                features=statement_features(st, name),
                meta={"theorem": st.name, "prefix": st.prefix, "theorem_sentence": st.theorem,
                      "declared": list(st.declared), "requires": list(st.requires)})  # fmt: skip
