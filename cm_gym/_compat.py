"""The import paths of cm_gym before the layer packages (issue 24) keep working.

`ALIASES` maps each moved module or package to its new place; `AliasFinder` (installed first on
``sys.meta_path`` by ``cm_gym/__init__.py``) answers an import of an old name — or of anything
under an old package name — with the module object of the new name, so ``cm_gym.features`` *is*
``cm_gym.envs.features``: isinstance checks, monkeypatching and pickles written before the move
(which name classes by their old module) behave as before. New code imports the new names.
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


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of moved modules (see `ALIASES`)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put one `AliasFinder` first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
