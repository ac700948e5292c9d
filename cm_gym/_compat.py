"""The import paths of cm_gym before the layer packages (issue 24) keep working.

`ALIASES` maps each moved module or package to its new place; `AliasFinder` (installed first on
``sys.meta_path`` by ``cm_gym/__init__.py``) answers an import of an old name — or of anything
under an old package name — with the module object of the new name, so ``cm_gym.features`` *is*
``cm_gym.envs.features``: isinstance checks, monkeypatching and pickles written before the move
(which name classes by their old module) behave as before. New code imports the new names.

`MOVED_NAMES` (issue 33) forwards *names* that moved between modules that both still exist
(``from cm_gym.llm.cache import CachedLLM``, now in `cm_gym.llm.cached`): the finder wraps the old
module's loader so that, once it has run, the module gets a PEP 562 ``__getattr__`` answering each
moved name with the object itself (the same object, not a copy). **Which names:** every public
name (no leading underscore) that a cm_gym module defined at any commit of the project's history
and that no longer resolves there, when it has one new home (``python
docs_tools/moved_names_scan.py`` walks the history with ``ast`` and lists them), plus the re-exports users imported that the
issue reported (``prompts.fenced``, ``store.open_store``, ``batch.CachedLLM``). Names that were
removed, not moved (``sat.dimacs.DEFAULT_ALLOWANCE``, ``smt.smtlib.load_smtlib_dir``,
``math.evaluator.PARTIAL_MAX``, ...), and incidental imports (``Task`` through some module) are not
forwarded: import those from their documented homes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

#: old dotted name → new dotted name (a package maps everything under it)
ALIASES: dict[str, str] = {
    "cm_gym.types": "cm_gym.core.types",
    "cm_gym.paths": "cm_gym.core.paths",
    "cm_gym.splits": "cm_gym.core.splits",
    "cm_gym.boundedjson": "cm_gym.core.boundedjson",
    "cm_gym.progress": "cm_gym.core.progress",
    "cm_gym.quick": "cm_gym.core.quick",
    "cm_gym.registry": "cm_gym.domains.registry",
    "cm_gym.domain_check": "cm_gym.domains.check",
    "cm_gym.reference_guard": "cm_gym.domains.reference_guard",
    "cm_gym.memory.conditions": "cm_gym.domains.conditions",
    "cm_gym.prefetch": "cm_gym.agent.prefetch",
    "cm_gym.features": "cm_gym.envs.features",
    "cm_gym.metrics": "cm_gym.envs.metrics",
    "cm_gym.wrappers": "cm_gym.envs.wrappers",
    "cm_gym.training": "cm_gym.protocol.training",
    "cm_gym.evaluation": "cm_gym.protocol.evaluation",
    "cm_gym.report": "cm_gym.protocol.report",
    "cm_gym.provenance": "cm_gym.protocol.provenance",
    "cm_gym.outputs": "cm_gym.protocol.outputs",
    "cm_gym.experiments": "cm_gym.studies.experiments",
    "cm_gym.mechanisms": "cm_gym.studies.mechanisms",
    "cm_gym.analysis": "cm_gym.studies.analysis",
    "cm_gym.ray_backend": "cm_gym.backends.ray",
    "cm_gym.tabulate": "cm_gym.cli.tabulation",
    "cm_gym.datacheck": "cm_gym.cli.datacheck",
    "cm_gym.loadcheck": "cm_gym.cli.loadcheck",
    # domain modules renamed to the shared role names (loader, edits, conditions, errormodel)
    "cm_gym.domains.sql.errors": "cm_gym.domains.sql.errormodel",
    "cm_gym.domains.sql.spider": "cm_gym.domains.sql.loader",
    "cm_gym.domains.humaneval.model": "cm_gym.domains.humaneval.errormodel",
    "cm_gym.domains.code.records": "cm_gym.domains.code.conditions",
    "cm_gym.domains.dafny.records": "cm_gym.domains.dafny.conditions",
    "cm_gym.domains.math.records": "cm_gym.domains.math.conditions",
    "cm_gym.domains.code.quixbugs": "cm_gym.domains.code.loader",
    "cm_gym.domains.code.mutations": "cm_gym.domains.code.edits",
    "cm_gym.domains.sat.satlib": "cm_gym.domains.sat.loader",
    "cm_gym.domains.sat.generate": "cm_gym.domains.sat.generated",
    "cm_gym.domains.smt.generate": "cm_gym.domains.smt.generated",
    # top-level modules of the flat package that the layering moved (issue 33)
    "cm_gym.catalog": "cm_gym.domains.catalog",
    "cm_gym.plugins": "cm_gym.core.plugins",
    "cm_gym.version": "cm_gym.core.version",
}

_SYSCALLS = ("CLONE_NEWIPC", "CLONE_NEWNET", "CLONE_NEWNS", "CLONE_NEWUSER", "MS_BIND", "MS_NODEV",
             "MS_NOSUID", "MS_PRIVATE", "MS_REC", "PR_SET_NO_NEW_PRIVS", "PR_SET_PDEATHSIG")  # fmt: skip
_DAFNY_SLIPS = ("guard_invariants", "SLIP_RATES", "drop_slice_invariant", "hard_termination", "slice_spec",
                "strict_index_loop", "weak_bound")  # fmt: skip

#: module that still exists → {name that moved out of it: the module that holds it now}
MOVED_NAMES: dict[str, dict[str, str]] = {
    "cm_gym.llm.cache": {
        "CachedLLM": "cm_gym.llm.cached",
        "backend_identity": "cm_gym.llm.cached",
        "SCHEMA_NAME": "cm_gym.llm.cache_db",
        "SCHEMA_VERSION": "cm_gym.llm.cache_db",
    },
    "cm_gym.llm.batch": {"CachedLLM": "cm_gym.llm.cached", "CallRequest": "cm_gym.llm.call_request"},
    "cm_gym.llm.prompts": {"fenced": "cm_gym.llm.fence"},
    "cm_gym.memory.store": {"open_store": "cm_gym.memory.opening"},
    "cm_gym.memory.snapshot": {"open_store": "cm_gym.memory.opening"},
    "cm_gym.domains.dafny.edits": {
        **dict.fromkeys(_DAFNY_SLIPS, "cm_gym.domains.dafny.slips"),
        "dafny_error_model": "cm_gym.domains.dafny.errormodel",
    },
    "cm_gym.domains.smt.smtlib": dict.fromkeys(
        (
            "smtlib_task",
            "load_smtlib_tasks",
            "reference_config",
            "ALLOWANCE",
            "LOGIC_DIRS",
            "REFERENCE_TACTIC",
        ),
        "cm_gym.domains.smt.loader",
    ),
    "cm_gym.domains.sat.dimacs": dict.fromkeys(
        ("satlib_task", "load_satlib_tasks", "FamilyInfo", "FAMILIES", "REFERENCE_SOLVER"),
        "cm_gym.domains.sat.loader",
    ),
    "cm_gym.domains.sql.evaluator": {"MAX_VALUE_BYTES": "cm_gym.domains.sql._engine"},
    "cm_gym.evaluators.isolation": dict.fromkeys(_SYSCALLS, "cm_gym.evaluators._syscalls"),
    "cm_gym.studies.analysis.real_errors": dict.fromkeys(
        ("compare", "collectors"), "cm_gym.studies.analysis.real_errors_compare"
    ),
}


def new_name(old: str) -> str | None:
    """The current name of module `old` (None when `old` is not a moved name)."""
    for prefix, target in ALIASES.items():
        if old == prefix or old.startswith(prefix + "."):
            return target + old[len(prefix) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the already-imported module of its new name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


def forward_names(module: ModuleType) -> None:
    """Give `module` a PEP 562 ``__getattr__`` that answers its moved names (`MOVED_NAMES`) from
    their new modules, after any ``__getattr__`` of its own (idempotent)."""
    table = MOVED_NAMES.get(module.__name__)
    own = module.__dict__.get("__getattr__")
    if not table or getattr(own, "_cm_gym_forwarder", False):
        return

    def __getattr__(name: str) -> object:
        home = table.get(name)
        if home is not None:
            return getattr(importlib.import_module(home), name)
        if own is not None:
            return own(name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    __getattr__._cm_gym_forwarder = True  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _ForwardingLoader(importlib.abc.Loader):
    """The module's own loader, then `forward_names` on the module it made."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        forward_names(module)


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of moved modules (see `ALIASES`), and wraps the loader of every module
    that names moved out of (see `MOVED_NAMES`)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED_NAMES:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                spec.loader = _ForwardingLoader(spec.loader)
            return spec
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put one `AliasFinder` first on ``sys.meta_path`` (idempotent); modules imported before it
    get their forwarded names now."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
    for name in MOVED_NAMES:
        module = sys.modules.get(name)
        if module is not None:
            forward_names(module)
