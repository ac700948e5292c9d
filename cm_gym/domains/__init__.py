"""Benchmark domains. Every sub-package here is a plugin that registers itself on import;
third-party plugins register through the ``cm_gym.benchmarks`` entry-point group."""

from __future__ import annotations

import importlib
import logging
import pkgutil
from importlib.metadata import entry_points

logger = logging.getLogger(__name__)
_loaded = False


def load_builtin_domains() -> None:
    """Import every domain package under `cm_gym.domains` and every entry-point plugin once.

    A plugin that fails to import (a missing optional dependency) is logged and skipped, so one
    broken domain never hides the others.
    """
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            continue
        try:
            importlib.import_module(f"{__name__}.{info.name}")
        except Exception:  # noqa: BLE001 - a broken plugin must not break the others
            logger.exception("could not load domain plugin %s", info.name)
    for ep in entry_points(group="cm_gym.benchmarks"):
        try:
            ep.load()
        except Exception:  # noqa: BLE001
            logger.exception("could not load benchmark plugin %s", ep.name)
