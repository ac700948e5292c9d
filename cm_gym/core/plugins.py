"""Named plugins resolved lazily: a group maps a name to a ``"module:attr"`` string (an installed
entry point of that group, or one registered at run time with `register`), imported only when
looked up — the way Gymnasium resolves an env's ``entry_point``. Lower layers name an optional part
(the Ray learners, the Ray experiment backend) by its plugin name, never by its module.

**Built-ins first, clashes refused** (issue 33). The entry points of cm_gym's own distribution
(`BUILTIN_DISTRIBUTION`) are taken before any third party's, whatever their names sort as, so a
third-party plugin that claims a taken name cannot replace a built-in: it is refused with one
warning line naming both distributions (`clash_message`) and the first owner stays. With
``CM_GYM_STRICT_PLUGINS=1`` (`strict`) a clash is a `PluginConflictError` instead — one line, no
traceback, at the command line. Overriding a name at run time is explicit: ``register(...,
replace=True)``, logged. A plugin whose import fails is a `PluginLoadError` naming the group and the
plugin (also an `ImportError`, for callers that catch that).

**Shadowed plugins** (issue 36). ``python -c``, ``python -m`` and notebooks put the current
directory first on ``sys.path``, so a folder there named like a plugin's package (its project
folder, typically) is imported instead of the installed plugin — as a namespace package when it
has no ``__init__.py`` — and the entry point's attribute is missing. `shadowing_message` tells
that apart from a broken plugin, and the load raises `PluginShadowedError` naming the folder and
the fixes (run from elsewhere, ``python -I``, rename the folder).
"""

from __future__ import annotations

import importlib
import logging
import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.types import CmGymError

logger = logging.getLogger(__name__)

#: the distribution whose entry points are built-ins (loaded first, never replaced by a plugin)
BUILTIN_DISTRIBUTION = "cm-gym"

#: group → name → "module:attr", registered in this process (checked against the installed ones)
_REGISTERED: dict[str, dict[str, str]] = {}
#: clashes already reported in this process (one warning each, not one per lookup)
_REPORTED: set[tuple[str, str, str]] = set()


class PluginNotFoundError(CmGymError):
    """No plugin of that name in that group (not installed, or its package metadata is stale)."""


class PluginConflictError(CmGymError):
    """A plugin claims a name another distribution (or a run-time registration) already holds."""


class PluginLoadError(CmGymError, ImportError):
    """A plugin's module failed to import, or does not have the attribute its entry point names."""


class PluginShadowedError(PluginLoadError):
    """A folder on ``sys.path`` (usually the current directory) holds a module of the plugin's
    name that is not the installed plugin, and Python imported that folder instead."""


def strict() -> bool:
    """``CM_GYM_STRICT_PLUGINS=1``: a plugin that clashes or fails to load stops the program."""
    return os.environ.get("CM_GYM_STRICT_PLUGINS", "").strip().lower() in ("1", "true", "yes")


def distribution(ep: Any) -> str:
    """The name of the distribution that installed entry point `ep` ("unknown distribution"
    for one without package metadata, such as an entry point built by hand)."""
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) if dist is not None else None
    if not name and dist is not None:
        name = getattr(dist, "metadata", {}).get("Name") if hasattr(dist, "metadata") else None
    return str(name) if name else "unknown distribution"


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def is_builtin(ep: Any) -> bool:
    """An entry point of cm_gym itself: from the cm-gym distribution, or (without metadata) one
    that names a module inside the ``cm_gym`` package."""
    dist = distribution(ep)
    if dist != "unknown distribution":
        return _canonical(dist) == BUILTIN_DISTRIBUTION
    return str(getattr(ep, "value", "")).startswith("cm_gym.")


def ordered(points: Iterable[Any]) -> list[Any]:
    """Entry points in load order: cm_gym's own first, then third parties', each by name."""
    eps = list(points)
    return sorted(eps, key=lambda ep: (not is_builtin(ep), str(ep.name), distribution(ep)))


def clash_message(what: str, group: str, newcomer: str, owner: str) -> str:
    """The one line that reports a refused clash: `what` (e.g. ``"plugin 'x'"``) of distribution
    `newcomer` in `group` is refused because distribution `owner` holds that name."""
    return (
        f"{what} of {newcomer} ({group}) is refused: {owner} already provides that name and keeps it; "
        "rename the plugin (CM_GYM_STRICT_PLUGINS=1 makes a clash an error)"
    )


def report_clash(what: str, group: str, newcomer: str, owner: str, log: logging.Logger = logger) -> None:
    """Refuse a clash: `PluginConflictError` in strict mode, else one warning line (once)."""
    message = clash_message(what, group, newcomer, owner)
    if strict():
        raise PluginConflictError(message)
    if (what, group, newcomer) not in _REPORTED:
        _REPORTED.add((what, group, newcomer))
        log.warning("%s", message)


def installed(group: str) -> dict[str, str]:
    """name → "module:attr" of the installed entry points of `group`, built-ins first; a later
    entry point that claims a taken name is refused (`report_clash`)."""
    found: dict[str, tuple[str, str]] = {}
    for ep in ordered(entry_points(group=group)):
        if ep.name in found:
            target, owner = found[ep.name]
            if target != ep.value:
                report_clash(f"plugin {ep.name!r}", group, distribution(ep), owner)
            continue
        found[ep.name] = (ep.value, distribution(ep))
    return {name: target for name, (target, _owner) in found.items()}


def register(group: str, name: str, target: str, *, replace: bool = False) -> None:
    """Register ``name`` in ``group`` as ``"module:attr"`` (resolved on the first lookup).

    A name that is already taken (installed or registered) with another target is refused with
    `PluginConflictError` unless `replace` is given; a replacement is logged at warning level."""
    module, colon, attr = target.partition(":")
    if not module or not colon or not attr:
        raise ValueError(f"plugin target must be 'module:attr', got {target!r}")
    current = targets(group).get(name)
    if current is not None and current != target:
        if not replace:
            raise PluginConflictError(
                f"{group} plugin {name!r} is already {current}; pass replace=True to override it with {target}"
            )
        logger.warning("%s plugin %r: %s replaces %s (replace=True)", group, name, target, current)
    _REGISTERED.setdefault(group, {})[name] = target


def targets(group: str) -> dict[str, str]:
    """name → "module:attr" of every plugin of ``group`` (installed, then registered ones)."""
    found = installed(group)
    found.update(_REGISTERED.get(group, {}))
    return dict(sorted(found.items()))


def _install_locations(ep: Any, *, editable: bool = True) -> list[Path]:
    """Where `ep`'s module may legitimately come from: the standard library, site-packages
    (system, user, the distribution's own) and, with `editable`, an editable install's project
    folder (``direct_url.json``)."""
    places = [*site.getsitepackages(), site.getusersitepackages()]
    places += [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    dist = getattr(ep, "dist", None)
    if dist is not None:
        try:
            places.append(str(dist.locate_file("")))
            direct = boundedjson.loads(dist.read_text("direct_url.json") or "{}", what="direct_url.json")
        except (AttributeError, OSError, ValueError):  # BoundedJSONError is a ValueError
            direct = {}
        if not isinstance(direct, dict):
            direct = {}
        url = str(direct.get("url", ""))
        if editable and (direct.get("dir_info") or {}).get("editable") and url.startswith("file://"):
            places.append(url.removeprefix("file://"))
    return [Path(p).resolve() for p in dict.fromkeys(places) if p]


def shadowing_message(ep: Any) -> str | None:
    """Why entry point `ep` (``name``, ``value`` = ``"module:attr"``, optional ``dist``) failed
    to load when its top-level package was imported from a folder that is not the installed
    plugin: a namespace package (a folder without ``__init__.py``, e.g. the plugin's project
    folder in the current directory) or a module outside site-packages and the distribution's own
    location. None when the imported package is the installed one (the plugin itself is broken)."""
    top_name = str(ep.value).partition(":")[0].partition(".")[0].strip()
    top = sys.modules.get(top_name)
    if top is None:
        return None
    file = getattr(top, "__file__", None)
    # A namespace package is never an editable install's own copy, even inside its project folder:
    # that folder itself, found on sys.path, is the shadow (setuptools' editable finder comes later).
    installed_at = _install_locations(ep, editable=file is not None)

    def elsewhere(path: str) -> bool:
        return not any(Path(path).resolve().is_relative_to(place) for place in installed_at)

    if file is None:  # a namespace package: folders without __init__.py
        folders = [str(p) for p in getattr(top, "__path__", ()) if elsewhere(str(p))]
        if not folders:
            return None
        folder, what = folders[0], "a folder without __init__.py"
    else:
        if not elsewhere(file):
            return None
        where = Path(file).resolve()
        folder = str(where.parent if where.name == "__init__.py" else where)
        what = "outside site-packages and the plugin's install location"
    return (
        f"plugin {ep.name!r} ({ep.value}) of {distribution(ep)} is shadowed: Python imported "
        f"{top_name!r} from {folder} ({what}), not the installed plugin, because that folder's "
        "parent is on sys.path (python -c, python -m and notebooks put the current directory first); "
        f"run from another directory, run Python isolated (python -I), or rename {folder}"
    )


def entry_point(group: str, name: str) -> Any | None:
    """The installed entry point `name` of `group` (the first in load order), None if none."""
    return next((ep for ep in ordered(entry_points(group=group)) if ep.name == name), None)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def resolve(group: str, name: str) -> Any:
    """The object ``name`` stands for in ``group``, imported now. `PluginNotFoundError` for an
    unknown name; `PluginLoadError` (naming group and plugin) when its import fails."""
    known = targets(group)
    target = known.get(name)
    if target is None:
        raise PluginNotFoundError(
            f"no {group!r} plugin named {name!r} (installed: {', '.join(known) or 'none'}); if it is a "
            "built-in one, reinstall cm-gym (pip install -e .) so that its entry points are registered"
        )
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 - any failure inside a plugin's import is the plugin's
        ep = entry_point(group, name)
        shadow = (
            shadowing_message(ep) if ep is not None and ep.value == target and not is_builtin(ep) else None
        )
        if shadow is not None and isinstance(exc, (AttributeError, ImportError)):
            raise PluginShadowedError(shadow, name=module) from exc
        raise PluginLoadError(
            f"{group} plugin {name!r} ({target}) could not be loaded: {_first_line(exc)}", name=module
        ) from exc
    return obj
