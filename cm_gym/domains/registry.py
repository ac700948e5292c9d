"""Benchmark registry: `register_benchmark()` turns a domain plugin into Gymnasium env ids.

Like lm-evaluation-harness's task registry it refuses duplicates: a benchmark name or Gymnasium id
that is taken, and a `Domain` class whose ``name`` another class already uses (records and
conditions are keyed by that name). Registering benchmark ``Name`` in namespace ``ns`` registers the
Gymnasium id ``ns/Name-v<version>`` whose entry point is the shared `MemorySelectionEnv`; the env
reaches the domain only through this registry. ``strict=True`` also runs
`cm_gym.domains.check.check_domain` on the benchmark before registering it.

**The data-root contract.** A benchmark that reads public data declares `data_layout` (one line:
what its folder holds) and its `load_tasks` accepts ``root=``: a folder in that layout, in which
families / logics / databases are discovered from the folder structure; ``root=None`` means the
benchmark's default (under `cm_gym.core.paths.data_root()`). A loader may also accept ``report=`` (a
`cm_gym.domains.base.LoadReport`) and then records refused files and dropped tasks there instead
of raising. `BenchmarkSpec.load(data=DIR)` is the one way in: the env (``gym.make(id,
data=DIR)``), the protocol (`ProtocolConfig.data`) and every command that loads tasks (``--data
DIR``) go through it. It refuses ``data`` for a benchmark without a layout (a generated one) and a
``data`` that is not a folder, and an empty result, each with one line naming the fix. Loaders are
deterministic for given folder contents and never write into the folder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from cm_gym.core.types import Task
from cm_gym.domains.base import Domain
from cm_gym.domains.catalog import (
    _BENCHMARKS,
    _DOMAIN_FACTORIES,
    _DOMAINS,  # noqa: F401 - the tables are shared with cm_gym.domains.catalog; tests reach them here
    FAILED_PLUGINS,
    OWNERS,
    BenchmarkSpec,
    DataRootError,
    RegistryClashError,
    RegistryError,
    _class_name,
    current_distribution,
    domain_class_for,
    get_benchmark,
    get_domain,
    list_benchmarks,
    load_builtin_domains,
    load_plugin,
    owner_of,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ENV_ENTRY_POINT",
    "FAILED_PLUGINS",
    "BenchmarkSpec",
    "DataRootError",
    "RegistryClashError",
    "RegistryError",
    "domain_class_for",
    "get_benchmark",
    "get_domain",
    "list_benchmarks",
    "load_builtin_domains",
    "load_plugin",
    "register_benchmark",
]

ENV_ENTRY_POINT = "cm_gym.envs.selection:MemorySelectionEnv"


def register_benchmark(
    name: str,
    *,
    domain: Callable[[], Domain],
    load_tasks: Callable[..., Sequence[Task]],
    description: str = "",
    version: int = 0,
    namespace: str = "cm_gym",
    split_by_env: bool = False,
    default_split: str = "",
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
        default_split=default_split,
        env_kwargs=dict(env_kwargs or {}),
        default_n_build=default_n_build,
        data_layout=data_layout,
    )
    who = current_distribution()
    if name in _BENCHMARKS:
        raise RegistryClashError(
            f"benchmark {name!r} is already registered ({_BENCHMARKS[name].env_id}, by {owner_of('benchmark', name)})",
            kind="benchmark", name=name, owner=owner_of("benchmark", name),
        )  # fmt: skip
    if spec.env_id in gym.registry:
        raise RegistryClashError(
            f"Gymnasium id {spec.env_id!r} is already registered",
            kind="Gymnasium id", name=spec.env_id, owner=owner_of("id", spec.env_id),
        )  # fmt: skip
    domain_name = getattr(domain, "name", None)
    if not isinstance(domain_name, str):
        domain_name = domain().name
    owner, mine = domain_class_for(domain_name), _class_name(domain)
    if owner is not None and owner != mine:
        raise RegistryClashError(
            f"domain name {domain_name!r} of {mine} is already used by {owner}: give the new "
            "Domain class another `name` (stored in every Task and Record)",
            kind="domain name",
            name=domain_name,
            owner=owner_of("domain", domain_name),
        )
    if strict:
        from cm_gym.domains.check import check_domain  # the checker reads the catalog, never this module

        check_domain(domain(), list(spec.load()))
    _DOMAIN_FACTORIES.setdefault(domain_name, domain)
    _BENCHMARKS[name] = spec
    OWNERS.setdefault(("domain", domain_name), who)
    OWNERS[("benchmark", name)] = OWNERS[("id", spec.env_id)] = who
    gym.register(id=spec.env_id, entry_point=ENV_ENTRY_POINT, kwargs={"benchmark": name})
    logger.debug("registered benchmark %s as %s", name, spec.env_id)
    return spec
