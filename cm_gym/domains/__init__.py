"""Benchmark domains: the Domain contract (`base`), and one package per domain. Each domain
package registers its benchmarks when imported; the registry imports them through the
``cm_gym.domains`` entry-point group (built-ins, pyproject.toml) and ``cm_gym.benchmarks``
(third-party plugins), whose entries name either a module (importing it registers) or a function
(called once, with no arguments)."""

from __future__ import annotations

from typing import Any

_MOVED = ("FAILED_PLUGINS", "load_builtin_domains", "load_plugin")


def __getattr__(name: str) -> Any:
    """The plugin loader moved to `cm_gym.domains.catalog`; the old names keep working from here."""
    if name in _MOVED:
        from cm_gym.domains import catalog

        return getattr(catalog, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
