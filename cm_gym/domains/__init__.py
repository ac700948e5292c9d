"""Benchmark domains. Every sub-package here is a plugin that registers itself on import;
third-party plugins register through the ``cm_gym.benchmarks`` entry-point group, whose entries
name either a module (importing it registers) or a function (called once, with no arguments)."""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import traceback
import types
from importlib.metadata import EntryPoint, entry_points

logger = logging.getLogger(__name__)
_loaded = False
#: (plugin, traceback) of every plugin that failed to load in this process (``cm-gym -v`` prints them)
FAILED_PLUGINS: list[tuple[str, str]] = []


def _failed(kind: str, name: str, exc: BaseException) -> None:
    """One warning line for a plugin that failed to load; its traceback only at debug level."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    logger.warning(
        "could not load %s plugin %s: %s%s (skipped; cm-gym -v shows the traceback)",
        kind,
        name,
        type(exc).__name__,
        f": {text}" if text else "",
    )
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    FAILED_PLUGINS.append((name, tb))
    logger.debug("traceback of plugin %s:\n%s", name, tb)


def _strict() -> bool:
    """``CM_GYM_STRICT_PLUGINS=1``: a plugin that fails to load is an error, not a log line."""
    return os.environ.get("CM_GYM_STRICT_PLUGINS", "").strip().lower() in ("1", "true", "yes")


def load_plugin(ep: EntryPoint) -> None:
    """Load one ``cm_gym.benchmarks`` entry point: a module registers on import; a function is
    called once with no arguments. Anything else (a class, a constant) is refused."""
    obj = ep.load()
    if isinstance(obj, types.ModuleType):
        return
    if isinstance(obj, type) or not callable(obj):
        from cm_gym.registry import RegistryError

        raise RegistryError(
            f"entry point {ep.name} = {ep.value} names a {'class' if isinstance(obj, type) else type(obj).__name__}: name a module that "
            "registers on import, or a function that calls register_benchmark(...)"
        )
    obj()


def load_builtin_domains() -> None:
    """Import every domain package under `cm_gym.domains` and every entry-point plugin once.

    A plugin that fails to load (a missing optional dependency) is one warning line and skipped
    (its traceback at debug level, `FAILED_PLUGINS`), so one broken domain never hides the others;
    ``CM_GYM_STRICT_PLUGINS=1`` makes it an error.
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
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
            if _strict():
                raise
            _failed("domain", info.name, exc)
    for ep in entry_points(group="cm_gym.benchmarks"):
        try:
            load_plugin(ep)
        except Exception as exc:  # noqa: BLE001
            if _strict():
                raise
            _failed("benchmark", f"{ep.name} ({ep.value})", exc)
