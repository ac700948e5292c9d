"""A tiny fake domain ("llmtoy", benchmark "LLMTestToy") for the LLM-layer tests.

It exists only here, as a test double: actions are one-line SQL-like strings, the error model has
a feature-dependent boundary slip, an ORDER BY slip and a slip that never fits, and its
`apply_contrast` *cheats* (returns the reference) whenever it is handed a task whose reference is
not blanked — so a test can prove the simulated LLM never lets revision read the reference.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import HTTPServer
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.base import (
    Distillation,
    Domain,
    Edit,
    ErrorModel,
    ErrorOperator,
    PredicateFn,
    RevisionRates,
)
from cm_gym.domains.registry import RegistryError, get_benchmark, register_benchmark

TOY_BENCHMARK = "LLMTestToy"


class ToyEvaluator:
    """Exact match against the reference, whitespace-normalised."""

    def check(self, state: AgentState, action: Action) -> Outcome:
        ok = " ".join(action.text.split()) == " ".join(state.task.reference.split())
        return Outcome(
            score=float(ok), solved=ok, feedback="correct" if ok else "Wrong result set. Rows differ."
        )


def _replace_once(old: str, new: str) -> Any:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        return action.replace(old, new, 1) if old in action else None

    return apply


class ToyDomain(Domain):
    name = "llmtoy"
    action_kind = "toy SQL query"

    def make_evaluator(self, **kwargs: Any) -> ToyEvaluator:
        return ToyEvaluator()

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        edits: list[Edit] = []
        swaps = [(">=", ">"), (" > ", " >= "), ("<=", "<"), ("SELECT ", "SELECT DISTINCT ")]
        for old, new in swaps:
            if old in action and not (old == " > " and ">=" in action):
                edits.append(Edit(action.replace(old, new, 1), unit="where", description=f"{old}->{new}"))
        if " ORDER BY name" in action:
            edits.append(Edit(action.replace(" ORDER BY name", ""), unit="order"))
        else:
            edits.append(Edit(action + " ORDER BY name", unit="order"))
        return edits

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        def llmtoy_inclusive(task: Task, args: tuple[str, ...]) -> bool:
            """the task asks for an inclusive boundary"""
            return task.features.get("boundary") == "inclusive"

        return {"llmtoy_inclusive": llmtoy_inclusive}

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        if re.search(r"\bat least\b", task.prompt):
            return Distillation(
                "A threshold comparison may omit its boundary value.", 'mentions_any("at least")'
            )
        return Distillation("A query may need a different clause.", "")

    def error_model(self) -> ErrorModel:
        return ErrorModel(
            operators=(
                ErrorOperator(
                    "strict_boundary",
                    lambda t: 0.8 if t.features.get("boundary") == "inclusive" else 0.0,
                    _replace_once(">=", ">"),
                ),
                ErrorOperator(
                    "drop_order",
                    lambda t: float(t.features.get("p_order", 0.5)),
                    _replace_once(" ORDER BY name", ""),
                ),
                ErrorOperator("never_fits", lambda t: 1.0, lambda t, a, r: None),
            ),
            fix_prob={"react": 0.3, "reflexion": 0.6},
            revision=RevisionRates(apply=0.8, match_disturb=0.0, unrelated_disturb=0.0),
        )

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        if task.reference:  # the cheat a correct simulator must never trigger
            return task.reference
        return super().apply_contrast(task, draft, a_minus, a_plus)


def toy_tasks(n: int = 40) -> list[Task]:
    """Deterministic toy tasks: even ids inclusive ("at least"), odd ids strict ("more than")."""
    tasks = []
    for i in range(n):
        inclusive = i % 2 == 0
        op = ">=" if inclusive else ">"
        phrase = "at least" if inclusive else "more than"
        tasks.append(
            Task(
                task_id=f"llmtoy-{i:03d}",
                domain="llmtoy",
                prompt=f"List the names of users aged {phrase} {18 + i % 7}, sorted by name.",
                env_id=f"db{i % 3}",
                reference=f"SELECT name FROM users WHERE age {op} {18 + i % 7} ORDER BY name",
                context="CREATE TABLE users(name TEXT, age INT)",
                family="boundary",
                features={"boundary": "inclusive" if inclusive else "strict", "p_order": 0.5},
            )
        )
    return tasks


def ensure_toy_registered() -> None:
    """Register the toy benchmark once per process (the registry refuses duplicates)."""
    try:
        get_benchmark(TOY_BENCHMARK)
    except RegistryError:
        register_benchmark(
            TOY_BENCHMARK,
            domain=ToyDomain,
            load_tasks=lambda **kw: toy_tasks(),
            description="LLM-layer tests",
            namespace="cm_gym_test",  # test-only: excluded from the registered-env checks
        )


@pytest.fixture(scope="session")
def toy() -> list[Task]:
    """The toy benchmark's tasks (registered on first use)."""
    ensure_toy_registered()
    return toy_tasks()


@pytest.fixture(scope="session")
def toy_lookup(toy: list[Task]) -> dict[str, Task]:
    return {t.task_id: t for t in toy}


S = TypeVar("S", bound=HTTPServer)


@pytest.fixture()
def http_servers() -> Iterator[Callable[[S], S]]:
    """``start(server)``: serve a bound stdlib HTTP server in a daemon thread until the test ends."""
    servers: list[HTTPServer] = []

    def start(server: S) -> S:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def memo_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder with the persistent work memo on (the memo tests' processes)."""
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    return tmp_path / "cache"
