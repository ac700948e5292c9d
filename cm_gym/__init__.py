"""cm_gym: Gymnasium environments for learning when an LLM agent should use a verified
counterfactual memory record. Importing the package registers the built-in env ids
(``cm_gym/SQL-v0`` and the other domains' ids)."""

from __future__ import annotations

from cm_gym.registry import get_benchmark, get_domain, list_benchmarks, register_benchmark
from cm_gym.types import Action, AgentState, Outcome, Split, Task

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AgentState",
    "Outcome",
    "Split",
    "Task",
    "get_benchmark",
    "get_domain",
    "list_benchmarks",
    "register_benchmark",
]


def _register_builtins() -> None:
    from cm_gym.domains import load_builtin_domains

    load_builtin_domains()


_register_builtins()
