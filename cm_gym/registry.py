"""Benchmark registry: `register_benchmark()` turns a domain plugin into Gymnasium env ids.

Like lm-evaluation-harness's task registry it refuses duplicates: a benchmark name or Gymnasium id
that is taken, and a `Domain` class whose ``name`` another class already uses (records and
conditions are keyed by that name). Registering benchmark ``Name`` in namespace ``ns`` registers the
Gymnasium id ``ns/Name-v<version>`` whose entry point is the shared `MemorySelectionEnv`; the env
reaches the domain only through this registry. ``strict=True`` also runs
`cm_gym.domain_check.check_domain` on the benchmark before registering it.

**The data-root contract.** A benchmark that reads public data declares `data_layout` (one line:
what its folder holds) and its `load_tasks` accepts ``root=``: a folder in that layout, in which
families / logics / databases are discovered from the folder structure; ``root=None`` means the
benchmark's default (under `cm_gym.paths.data_root()`). A loader may also accept ``report=`` (a
`cm_gym.domains.base.LoadReport`) and then records refused files and dropped tasks there instead
of raising. `BenchmarkSpec.load(data=DIR)` is the one way in: the env (``gym.make(id,
data=DIR)``), the protocol (`ProtocolConfig.data`) and every command that loads tasks (``--data
DIR``) go through it. It refuses ``data`` for a benchmark without a layout (a generated one) and a
``data`` that is not a folder, and an empty result, each with one line naming the fix. Loaders are
deterministic for given folder contents and never write into the folder.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from cm_gym.domains.base import Domain, LoadReport
from cm_gym.types import CmGymError, Task

logger = logging.getLogger(__name__)

ENV_ENTRY_POINT = "cm_gym.envs.selection:MemorySelectionEnv"


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
    environments (databases, repositories) disjoint between build/train and eval;
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
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    default_n_build: int | None = None
    data_layout: str = ""

    @property
    def env_id(self) -> str:
        return f"{self.namespace}/{self.name}-v{self.version}"

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


def register_benchmark(
    name: str,
    *,
    domain: Callable[[], Domain],
    load_tasks: Callable[..., Sequence[Task]],
    description: str = "",
    version: int = 0,
    namespace: str = "cm_gym",
    split_by_env: bool = False,
    env_kwargs: Mapping[str, Any] | None = None,
    strict: bool = False,
    default_n_build: int | None = None,
    data_layout: str = "",
) -> BenchmarkSpec:
    """Register a benchmark and its Gymnasium id. A duplicate benchmark name or env id, and a
    domain whose ``name`` belongs to another class, are refused. With `strict`, the benchmark's
    tasks are loaded and `check_domain` must pass first (`DomainCheckError` otherwise).
    `data_layout` (one line) declares that `load_tasks` accepts ``root=`` a folder in that layout
    (the data-root contract in the module docstring)."""
    spec = BenchmarkSpec(
        name=name,
        domain=domain,
        load_tasks=load_tasks,
        description=description,
        version=version,
        namespace=namespace,
        split_by_env=split_by_env,
        env_kwargs=dict(env_kwargs or {}),
        default_n_build=default_n_build,
        data_layout=data_layout,
    )
    if name in _BENCHMARKS:
        raise RegistryError(f"benchmark {name!r} is already registered ({_BENCHMARKS[name].env_id})")
    if spec.env_id in gym.registry:
        raise RegistryError(f"Gymnasium id {spec.env_id!r} is already registered")
    domain_name = getattr(domain, "name", None)
    if not isinstance(domain_name, str):
        domain_name = domain().name
    owner, mine = domain_class_for(domain_name), _class_name(domain)
    if owner is not None and owner != mine:
        raise RegistryError(
            f"domain name {domain_name!r} of {mine} is already used by {owner}: give the new "
            "Domain class another `name` (stored in every Task and Record)"
        )
    if strict:
        from cm_gym.domain_check import check_domain

        check_domain(domain(), list(spec.load()))
    _DOMAIN_FACTORIES.setdefault(domain_name, domain)
    _BENCHMARKS[name] = spec
    gym.register(id=spec.env_id, entry_point=ENV_ENTRY_POINT, kwargs={"benchmark": name})
    logger.debug("registered benchmark %s as %s", name, spec.env_id)
    return spec


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


def _ensure_builtins() -> None:
    from cm_gym.domains import load_builtin_domains

    load_builtin_domains()
