"""cm_gym: Gymnasium environments for learning when an LLM agent should use a verified
counterfactual memory record. Importing the package registers the built-in env ids
(``cm_gym/SQL-v0`` and the other domains' ids).

The package is layered (ARCHITECTURE.md): core → evaluators → domains → llm → agent → memory →
envs → agents → protocol → studies → backends → cli; nothing imports upward. Module paths from
before the layers (``cm_gym.features``, ``cm_gym.registry``, ...) still import, as the same module
objects (`cm_gym._compat`)."""

from __future__ import annotations

from cm_gym import _compat
from cm_gym.core.types import Action, AgentState, Outcome, Split, Task
from cm_gym.core.version import __version__  # noqa: F401 - cm_gym.__version__
from cm_gym.domains.registry import get_benchmark, get_domain, list_benchmarks, register_benchmark

_compat.install()  # old module paths (cm_gym.features, ...) import the moved modules

__all__ = [
    "Action",
    "AgentState",
    "DomainCheckError",
    "Outcome",
    "Split",
    "Task",
    "check_domain",
    "get_benchmark",
    "get_domain",
    "list_benchmarks",
    "register_benchmark",
]


def _register_builtins() -> None:
    """Load the domain plugins once. In strict mode (``CM_GYM_STRICT_PLUGINS=1``) a clash or a
    broken plugin is kept by the catalog and raised by every lookup, so that ``import cm_gym``
    itself succeeds and a command reports it as one line (`cm_gym.cli.guarded_run`)."""
    import contextlib

    from cm_gym.core.types import CmGymError
    from cm_gym.domains.catalog import load_builtin_domains

    with contextlib.suppress(CmGymError):  # raised again by the first lookup (get_benchmark, gym.make)
        load_builtin_domains()


def _preload_in_forkserver() -> None:
    """Worker processes of SB3's ``SubprocVecEnv`` (and any ``forkserver`` pool) are forked from a
    server process that never imported cm_gym, so ``gym.make("cm_gym/SQL-v0")`` there fails with
    ``NamespaceNotFound`` (the parent only sees ``ConnectionResetError``). Ask multiprocessing to
    import cm_gym in that server too; this takes effect if the server has not started yet."""
    try:
        from multiprocessing import forkserver
    except ImportError:  # pragma: no cover - platforms without forkserver
        return
    current = list(
        getattr(getattr(forkserver, "_forkserver", None), "_preload_modules", None) or ["__main__"]
    )
    if __name__ not in current:
        forkserver.set_forkserver_preload([*current, __name__])


def __getattr__(name: str) -> object:
    """Lazy public API: `check_domain`, `DomainCheckError`, `evaluate_policies` (they import the
    memory and protocol layers, which plain ``import cm_gym`` does not need)."""
    if name in ("check_domain", "DomainCheckError"):
        from cm_gym.domains import check as domain_check

        return getattr(domain_check, name)
    if name == "evaluate_policies":
        from cm_gym.protocol.evaluation import evaluate_policies

        return evaluate_policies
    raise AttributeError(f"module 'cm_gym' has no attribute {name!r}")


_register_builtins()
_preload_in_forkserver()
