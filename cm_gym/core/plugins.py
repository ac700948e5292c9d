"""Named plugins resolved lazily: a group maps a name to a ``"module:attr"`` string (an installed
entry point of that group, or one registered at run time with `register`), imported only when
looked up — the way Gymnasium resolves an env's ``entry_point``. Lower layers name an optional part
(the Ray learners, the Ray experiment backend) by its plugin name, never by its module."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from cm_gym.core.types import CmGymError

#: group → name → "module:attr", registered in this process (override installed entry points)
_REGISTERED: dict[str, dict[str, str]] = {}


class PluginNotFoundError(CmGymError):
    """No plugin of that name in that group (not installed, or its package metadata is stale)."""


def register(group: str, name: str, target: str) -> None:
    """Register ``name`` in ``group`` as ``"module:attr"`` (resolved on the first lookup)."""
    module, colon, attr = target.partition(":")
    if not module or not colon or not attr:
        raise ValueError(f"plugin target must be 'module:attr', got {target!r}")
    _REGISTERED.setdefault(group, {})[name] = target


def targets(group: str) -> dict[str, str]:
    """name → "module:attr" of every plugin of ``group`` (installed, then registered ones)."""
    found = {ep.name: ep.value for ep in entry_points(group=group)}
    found.update(_REGISTERED.get(group, {}))
    return dict(sorted(found.items()))


def resolve(group: str, name: str) -> Any:
    """The object ``name`` stands for in ``group``, imported now."""
    target = targets(group).get(name)
    if target is None:
        known = ", ".join(targets(group)) or "none"
        raise PluginNotFoundError(
            f"no {group!r} plugin named {name!r} (installed: {known}); if it is a built-in one, "
            "reinstall cm-gym (pip install -e .) so that its entry points are registered"
        )
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
