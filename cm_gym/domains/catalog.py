"""The benchmark catalog: the tables `register_benchmark` (`cm_gym.domains.registry`) writes and every
lookup reads (`get_benchmark`, `list_benchmarks`, `get_domain`), the `BenchmarkSpec` record, and
the loading of domain plugins through entry points on the first lookup. It imports no domain
package and no command: domains register themselves when their entry point is loaded."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from cm_gym.core import plugins
from cm_gym.core.types import CmGymError, Split, Task
from cm_gym.domains.base import Domain, LoadReport

logger = logging.getLogger(__name__)


class RegistryError(CmGymError):
    """Unknown or duplicate benchmark / domain name."""


class DataRootError(CmGymError):
    """A data folder given to a benchmark cannot be used (not a folder, no tasks, no layout)."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """One registered benchmark: a domain plus a task source.

    `load_tasks(**kwargs)` returns the benchmark's tasks (deterministic for given kwargs; the env,
    the protocol and the default store call it through `load`: no arguments, or ``root=`` a data
    folder);
    `env_kwargs` are defaults passed to the env; `split_by_env` asks the default split to keep
    environments (databases, repositories) disjoint between build/train and eval; `default_split`,
    when set, names the default split instead (one of `cm_gym.core.splits.SPLIT_NAMES`: SpiderSQL's
    is ``"tasks"``, the paper's App. D.2 split; `make_split` takes another by name);
    `default_n_build` caps the build tasks of the default store that a bare ``gym.make`` builds on
    first use (for benchmarks whose world model takes seconds per check; None = the whole build
    split). The protocol (``cm-gym run`` / ``build``) builds on its own, full split. `data_layout`
    describes the folder `load(data=DIR)` accepts ("" = generated tasks, no data folder).
    """

    name: str
    domain: Callable[[], Domain]
    load_tasks: Callable[..., Sequence[Task]]
    description: str = ""
    version: int = 0
    namespace: str = "cm_gym"
    split_by_env: bool = False
    default_split: str = ""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    default_n_build: int | None = None
    data_layout: str = ""

    @property
    def env_id(self) -> str:
        return f"{self.namespace}/{self.name}-v{self.version}"

    def split_kind(self, split: str | None = None) -> str:
        """The split kind (`cm_gym.core.splits.SPLIT_KINDS`) of `split` (a name such as "tasks" or
        "databases"), or of this benchmark's default when None / "default"."""
        from cm_gym.core.splits import split_kind

        if split and split != "default":
            return split_kind(split)
        if self.default_split:
            return split_kind(self.default_split)
        return "environments" if self.split_by_env else "shuffled"

    def make_split(self, tasks: Sequence[Task], *, seed: int, split: str | None = None) -> Split:
        """The seeded build / train / eval split of `tasks` of kind `split_kind(split)`."""
        from cm_gym.core.splits import make_split

        return make_split(tasks, seed=seed, kind=self.split_kind(split))

    @property
    def domain_name(self) -> str:
        """`Domain.name` of this benchmark's domain (without building it when it is a class)."""
        name = getattr(self.domain, "name", None)
        return name if isinstance(name, str) else self.domain().name

    def load(
        self, data: str | Path | None = None, *, report: LoadReport | None = None, **kwargs: Any
    ) -> list[Task]:
        """The benchmark's tasks, from folder `data` when given (see the data-root contract in the
        module docstring); `report` is passed on to a loader that accepts it."""
        if data is not None:
            if not self.data_layout:
                readers = ", ".join(s.name for s in list_benchmarks() if s.data_layout) or "none"
                raise DataRootError(
                    f"benchmark {self.name!r} generates its tasks and reads no data folder; "
                    f"--data / data= applies to: {readers}"
                )
            folder = Path(data).expanduser()
            if not folder.is_dir():
                raise DataRootError(
                    f"data folder {str(data)!r} for {self.name} is not a directory (want: {self.data_layout})"
                )
            kwargs["root"] = folder.resolve()
        if report is not None and _accepts(self.load_tasks, "report"):
            kwargs["report"] = report
        tasks = list(self.load_tasks(**kwargs))
        if not tasks and data is not None:
            raise DataRootError(f"no {self.name} tasks found in {data} (want: {self.data_layout})")
        return tasks


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


_BENCHMARKS: dict[str, BenchmarkSpec] = {}
_DOMAINS: dict[str, Domain] = {}
_DOMAIN_FACTORIES: dict[str, Callable[[], Domain]] = {}


def _class_name(domain: Any) -> str:
    """Qualified name of the Domain class that `domain` (a class, instance or factory) makes."""
    cls = domain if isinstance(domain, type) else type(domain if isinstance(domain, Domain) else domain())
    return f"{cls.__module__}.{cls.__qualname__}"


def domain_class_for(name: str) -> str | None:
    """The qualified name of the class registered under domain `name` (None when free)."""
    factory = _DOMAIN_FACTORIES.get(name)
    return None if factory is None else _class_name(factory)


def get_benchmark(name: str) -> BenchmarkSpec:
    """Look up a benchmark by name ("SQL") or env id ("cm_gym/SQL-v0")."""
    _ensure_builtins()
    if name in _BENCHMARKS:
        return _BENCHMARKS[name]
    for spec in _BENCHMARKS.values():
        if spec.env_id == name or spec.env_id.split(":")[-1] == name:
            return spec
    known = ", ".join(sorted(_BENCHMARKS)) or "none"
    raise RegistryError(f"unknown benchmark {name!r}; registered: {known}")


def list_benchmarks() -> list[BenchmarkSpec]:
    """All registered benchmarks, sorted by name."""
    _ensure_builtins()
    return [_BENCHMARKS[k] for k in sorted(_BENCHMARKS)]


def get_domain(name: str) -> Domain:
    """The (cached) Domain instance with this `Domain.name`."""
    _ensure_builtins()
    if name not in _DOMAINS:
        factory = _DOMAIN_FACTORIES.get(name)
        if factory is None:
            for spec in _BENCHMARKS.values():
                candidate = spec.domain()
                _DOMAINS.setdefault(candidate.name, candidate)
            if name not in _DOMAINS:
                raise RegistryError(f"unknown domain {name!r}; known: {', '.join(sorted(_DOMAINS))}")
        else:
            _DOMAINS[name] = factory()
    return _DOMAINS[name]


#: Entry-point group of the built-in domain packages (pyproject ``[project.entry-points."cm_gym.domains"]``)
BUILTIN_GROUP = "cm_gym.domains"
#: Entry-point group of third-party benchmark plugins
PLUGIN_GROUP = "cm_gym.benchmarks"
#: (plugin, traceback) of every plugin that failed to load in this process (``cm-gym -v`` prints them)
FAILED_PLUGINS: list[tuple[str, str]] = []
_loaded = False
#: the strict-mode error of the first load, raised again by every later lookup
_strict_failure: CmGymError | None = None
#: plugin loading logs under the domains package, where the plugins live
_plugin_logger = logging.getLogger("cm_gym.domains")
#: the distribution whose entry point is being loaded now (innermost last)
_LOADING: list[str] = []
#: ("benchmark" | "domain" | "id", name) → the distribution that registered it
OWNERS: dict[tuple[str, str], str] = {}


class RegistryClashError(RegistryError):
    """A benchmark name, env id or domain name that another registration holds (`owner`)."""

    def __init__(self, message: str, *, kind: str, name: str, owner: str) -> None:
        super().__init__(message)
        self.kind, self.name, self.owner = kind, name, owner


def current_distribution() -> str:
    """Who is registering now: the distribution of the entry point being loaded, or "a run-time
    registration" (a script calling `register_benchmark` itself)."""
    return _LOADING[-1] if _LOADING else "a run-time registration"


def owner_of(kind: str, name: str) -> str:
    """The distribution that registered `name` (a benchmark, env id or domain name)."""
    return OWNERS.get((kind, name), "an earlier registration")


def _failed(kind: str, name: str, exc: BaseException) -> None:
    """One warning line for a plugin that failed to load; its traceback only at debug level."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    _plugin_logger.warning(
        "could not load %s plugin %s: %s%s (skipped; cm-gym -v shows the traceback)",
        kind,
        name,
        type(exc).__name__,
        f": {text}" if text else "",
    )
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    FAILED_PLUGINS.append((name, tb))
    _plugin_logger.debug("traceback of plugin %s:\n%s", name, tb)


def _strict() -> bool:
    """``CM_GYM_STRICT_PLUGINS=1``: a plugin that fails to load is an error, not a log line."""
    return plugins.strict()


def load_plugin(ep: EntryPoint) -> None:
    """Load one entry point: a module registers on import; a function is called once with no
    arguments. Anything else (a class, a constant) is refused. A third-party plugin whose package
    was imported from a folder that shadows the installed one (the current directory holding its
    project folder) is a `plugins.PluginShadowedError` naming that folder and the fixes."""
    try:
        obj = ep.load()
    except (AttributeError, ImportError) as exc:
        shadow = None if plugins.is_builtin(ep) else plugins.shadowing_message(ep)
        if shadow is not None:
            raise plugins.PluginShadowedError(shadow, name=str(ep.value).partition(":")[0]) from exc
        raise
    if isinstance(obj, types.ModuleType):
        return
    if isinstance(obj, type) or not callable(obj):
        raise RegistryError(
            f"entry point {ep.name} = {ep.value} names a {'class' if isinstance(obj, type) else type(obj).__name__}: name a module that "
            "registers on import, or a function that calls register_benchmark(...)"
        )
    obj()


def _entry_points() -> tuple[list[EntryPoint], list[EntryPoint]]:
    """(built-in, third-party) entry points of both groups, each in load order (by name).

    Built-ins are cm_gym's own (`cm_gym.core.plugins.is_builtin`), wherever they sort: a
    third-party entry point in either group loads after every built-in. Installed metadata older
    than the ``cm_gym.domains`` group (an editable install not reinstalled since) has none: then
    the domain packages are found by name, with one hint to reinstall."""
    points = [*entry_points(group=BUILTIN_GROUP), *entry_points(group=PLUGIN_GROUP)]
    builtin = [ep for ep in plugins.ordered(points) if plugins.is_builtin(ep)]
    third = [ep for ep in plugins.ordered(points) if not plugins.is_builtin(ep)]
    if not builtin:
        package = importlib.import_module("cm_gym.domains")
        _plugin_logger.info(
            "no %s entry points installed (reinstall cm-gym); scanning the package", BUILTIN_GROUP
        )
        builtin = [
            EntryPoint(info.name, f"{package.__name__}.{info.name}", BUILTIN_GROUP)
            for info in pkgutil.iter_modules(package.__path__)
            if info.ispkg
        ]
    return builtin, third


def _load_one(ep: EntryPoint, builtin: bool) -> None:
    """Load `ep` as its distribution; a clash is refused (`plugins.report_clash`), any other
    failure is one warning line — or, in strict mode, one `CmGymError` line."""
    group = getattr(ep, "group", None) or PLUGIN_GROUP
    kind = "domain" if builtin else "benchmark"
    label = ep.name if builtin else f"{ep.name} ({ep.value})"
    dist = plugins.distribution(ep) if not builtin else plugins.BUILTIN_DISTRIBUTION
    _LOADING.append(dist)
    try:
        load_plugin(ep)
    except RegistryClashError as exc:
        what = f"{exc.kind} {exc.name!r} (entry point {ep.name!r})"
        plugins.report_clash(what, group, dist, exc.owner, log=_plugin_logger)
    except plugins.PluginShadowedError as exc:  # the whole line: the folder and the fixes
        if _strict():
            raise
        _plugin_logger.warning("%s (skipped)", exc)
        FAILED_PLUGINS.append((label, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
        if _strict():
            text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise plugins.PluginLoadError(
                f"could not load {kind} plugin {label} of {dist} ({group}): {type(exc).__name__}"
                + (f": {text}" if text else "")
                + " (CM_GYM_STRICT_PLUGINS=1)"
            ) from exc
        _failed(kind, label, exc)
    finally:
        _LOADING.pop()


def load_builtin_domains() -> None:
    """Load every built-in domain, then every third-party plugin, once (entry points, loaded on
    the first registry lookup, as Gymnasium loads its plugins).

    Built-ins register first, so a plugin that claims a taken benchmark name, env id or domain
    name is refused with one line naming both distributions, and the built-in stays. A plugin that
    fails to load (a missing optional dependency) is one warning line and skipped (its traceback
    at debug level, `FAILED_PLUGINS`), so one broken domain never hides the others.
    ``CM_GYM_STRICT_PLUGINS=1`` makes either a `CmGymError` (one line at the command line), raised
    again by every later lookup.
    """
    global _loaded, _strict_failure
    if _loaded:
        if _strict_failure is not None:
            raise _strict_failure
        return
    _loaded = True
    builtin, third = _entry_points()
    try:
        for ep in builtin:
            _load_one(ep, True)
        for ep in third:
            _load_one(ep, False)
    except CmGymError as exc:  # strict mode only
        _strict_failure = exc
        raise


def _ensure_builtins() -> None:
    load_builtin_domains()
