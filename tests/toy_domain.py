"""A tiny domain for unit tests of domain-independent code (a test fixture, not a product).

Actions are comparisons like ``x >= 3``; the world model accepts the reference exactly.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, ErrorOperator, PredicateFn

FLIPS = {">=": ">", ">": ">=", "<=": "<", "<": "<="}


class ToyEvaluator:
    def __init__(self) -> None:
        self.calls = 0

    def check(self, state: AgentState, action: Action) -> Outcome:
        self.calls += 1
        ok = action.text.strip() == state.task.reference
        return Outcome(score=float(ok), solved=ok, feedback="correct" if ok else "wrong comparison")


def _flip(text: str) -> str | None:
    for op in (">=", "<=", ">", "<"):
        if f" {op} " in text:
            return text.replace(f" {op} ", f" {FLIPS[op]} ", 1)
    return None


class ToyDomain(Domain):
    name = "toycmp"
    action_kind = "comparison"

    def make_evaluator(self, **kwargs: object) -> ToyEvaluator:
        return ToyEvaluator()

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        flipped = _flip(action)
        return [Edit(flipped, "cmp:0", "flip comparison")] if flipped else []

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return {"toy_inclusive": lambda task, args: "at least" in task.prompt}

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return Distillation(f"boundary: {a_minus} -> {a_plus}", "toy_inclusive()")

    def error_model(self) -> ErrorModel:
        slip = ErrorOperator(
            "strict", lambda t: 0.9 if "at least" in t.prompt else 0.0, lambda t, a, rng: _flip(a)
        )
        return ErrorModel(operators=(slip,))


def toy_tasks(n: int = 20) -> list[Task]:
    """n tasks alternating inclusive ("at least") and strict ("more than") wording."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        k = int(rng.integers(1, 9))
        inclusive = i % 2 == 0
        prompt = f"values at least {k}" if inclusive else f"values more than {k}"
        ref = f"x >= {k}" if inclusive else f"x > {k}"
        out.append(
            Task(task_id=f"toy-{i:03d}", domain="toycmp", prompt=prompt, env_id=f"env{i % 3}", reference=ref)
        )
    return out
