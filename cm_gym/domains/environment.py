"""Environments that change: the part of the Domain contract that versions a task's environment
and applies a domain's documented family of changes to copies of it (paper App. A: "a record can
become stale when tools, schemas, or requirements change").

Three hooks, mixed into `cm_gym.domains.base.Domain`. A domain provides them in a module
``changes.py`` of its own package (found by name, like a plugin's entry point: module-level
``CHANGE_FAMILIES``, ``environment_version(domain_name, task)`` and ``adaptation_edits(task,
action)``, each optional), or overrides the methods:

* `environment_version(task)` — a content version of the task's environment (a schema and data
  digest, a tool version, a test-suite hash). Records carry the version they were last verified
  against, and retrieval never offers a record whose environment now has another version
  (`cm_gym.memory.freshness`). It must be a version of the *environment* (the same for every task
  of one env id while nothing changed), never of one task's data. Default: the domain name and the
  env id plus the change a changed environment recorded in ``meta["environment_change"]`` (so a
  domain that does not override it never filters a record it did not change).
* `change_families()` — the domain's named changes (`ChangeFamily`). ``family.apply(tasks, folder,
  seed)`` returns *copies* of the tasks whose environment changed, with every file it changes
  written under ``folder``; it never writes to the original files (shared data, generated caches).
* `adaptation_edits(task, action)` — local edits that adapt an action to the environment it now
  runs in (a column the schema no longer has → the closest one it has). Re-verification's repair
  search asks for them besides the domain's ordinary edit operators (`AlternativeGenerator(...,
  adapt=True)`); construction never does, so default stores are unchanged. Default: none.

`save_environment` / `load_environment` write and read such a changed environment as one folder
(``environment.json``: the change, the changed tasks, their content versions), the input of
``cm-gym memory reverify STORE --env FOLDER``. This module knows no memory, env or store.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import DataFileError, read_data_file
from cm_gym.core.types import CmGymError, Task

ENVIRONMENT_FILE = "environment.json"
ENVIRONMENT_FORMAT = "cm_gym.environment/1"
#: What a path inside the folder is written as, so the folder can be moved (or renamed into place).
FOLDER_TOKEN = "${ENV}"
#: caps of an environment.json read back (it lists every changed task, a few KiB each)
MAX_ENVIRONMENT_BYTES = 256 * 1024 * 1024
MAX_ENVIRONMENT_DEPTH = 64


class EnvironmentChangeError(CmGymError):
    """A change family is unknown, does not fit the tasks, or a changed environment is unreadable."""


@dataclass(frozen=True)
class EnvChange:
    """What one applied change did: its family, one line per touched environment, parameters,
    the environment ids it touched and the task ids whose reference had to change with it."""

    family: str
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)
    touched_envs: tuple[str, ...] = ()
    rewritten_tasks: tuple[str, ...] = ()


#: ``apply(tasks, folder, seed) -> (changed task copies in the same order, the change)``
ApplyFn = Callable[[Sequence[Task], Path, int], tuple[list[Task], EnvChange]]


@dataclass(frozen=True)
class ChangeFamily:
    """One documented kind of change of a domain's environments (e.g. SQL "rename_column").

    `kind` says what changes, in the issue's words: "schema", "data", "tool", "convention",
    "tests", "library", "spec" or "none" (a change that must leave every record valid: a control)."""

    name: str
    kind: str
    description: str
    apply: ApplyFn


def digest(*parts: Any) -> str:
    """A short sha256 over `parts` (strings, bytes or JSON-serialisable data)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes):
            h.update(part)
        elif isinstance(part, str):
            h.update(part.encode("utf-8", "replace"))
        else:
            h.update(json.dumps(part, sort_keys=True, default=str).encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:16]


@functools.cache
def changes_module(cls: type) -> Any:
    """The ``changes`` module of the package that defines `cls` (None when it has none)."""
    package = getattr(sys.modules.get(cls.__module__), "__package__", "") or ""
    if not package:
        return None
    try:
        return importlib.import_module(f"{package}.changes")
    except ModuleNotFoundError as exc:
        if exc.name == f"{package}.changes":
            return None
        raise


class EnvironmentHooks:
    """The environment hooks of the Domain contract (mixed into `Domain`), each answered by the
    domain package's ``changes`` module when it defines the name (see the module docstring)."""

    name: str

    def _changes(self, attr: str) -> Any:
        return getattr(changes_module(type(self)), attr, None)

    def environment_version(self, task: Task) -> str:
        """A content version of `task`'s environment; equal versions mean the world model sees
        the same environment. Default: the domain name, the env id and `change_marker(task)`."""
        fn = self._changes("environment_version")
        return (
            str(fn(self.name, task))
            if fn is not None
            else digest(self.name, task.env_id, change_marker(task))
        )

    def change_families(self) -> Mapping[str, ChangeFamily]:
        """The domain's documented change families by name (none by default)."""
        return dict(self._changes("CHANGE_FAMILIES") or {})

    def adaptation_edits(self, task: Task, action: str) -> list[Any]:
        """Local edits (`cm_gym.domains.base.Edit`) adapting `action` to `task`'s environment as
        it is now; reference-free. Default: none."""
        fn = self._changes("adaptation_edits")
        return list(fn(task, action)) if fn is not None else []

    def apply_change(
        self, family: str, tasks: Sequence[Task], folder: str | Path, seed: int = 0
    ) -> tuple[list[Task], EnvChange]:
        """Apply change `family` to copies of `tasks` under `folder` (created; must be empty)."""
        families = self.change_families()
        if family not in families:
            known = ", ".join(sorted(families)) or "none"
            raise EnvironmentChangeError(
                f"domain {self.name!r} has no change family {family!r} (known: {known})"
            )
        out = Path(folder)
        if out.exists() and any(out.iterdir()):
            raise EnvironmentChangeError(f"{out} is not empty: a changed environment needs a new folder")
        out.mkdir(parents=True, exist_ok=True)
        changed, change = families[family].apply(list(tasks), out.resolve(), int(seed))
        if [t.task_id for t in changed] != [t.task_id for t in tasks]:
            raise EnvironmentChangeError(f"change {family!r} must return one copy of every task, in order")
        return changed, change


#: The `Task.meta` key where a change family records what it changed in a task's environment.
CHANGE_META = "environment_change"


def change_marker(task: Task) -> Any:
    """What a change family recorded in `task`'s environment (None for an unchanged task)."""
    return (task.meta or {}).get(CHANGE_META)


def touched_envs(tasks: Sequence[Task]) -> tuple[str, ...]:
    """The env ids of the tasks a change marked (``meta["environment_change"]``), sorted."""
    return tuple(sorted({t.env_id for t in tasks if change_marker(t) is not None}))


def halve_allowance(
    tasks: Sequence[Task], feature: str, family: str, seed: int, kind: str = "solver"
) -> tuple[list[Task], EnvChange]:
    """A tool-configuration change shared by solver-task domains: the per-task resource allowance
    ``features[feature]`` (a conflict budget, an rlimit) of every `kind` task is halved."""
    out, changed = [], []
    for task in tasks:
        allowance = int((task.features or {}).get(feature, 0) or 0)
        if (task.features or {}).get("kind") != kind or allowance <= 1:
            out.append(task)
            continue
        new = allowance // 2
        out.append(
            dataclasses.replace(
                task,
                features={**task.features, feature: new},
                meta={**task.meta, CHANGE_META: {feature: new}},
                context=task.context.replace(str(allowance), str(new)),
            )
        )
        changed.append(task.task_id)
    text = f"{feature} halved on {len(changed)} {kind} tasks"
    return out, EnvChange(family, text, {"seed": seed}, touched_envs(out), ())


def environment_versions(domain: EnvironmentHooks, tasks: Sequence[Task]) -> dict[str, frozenset[str]]:
    """env_id → the content versions its tasks report (one, unless a domain versions per task)."""
    out: dict[str, set[str]] = {}
    for task in tasks:
        out.setdefault(task.env_id, set()).add(domain.environment_version(task))
    return {env: frozenset(v) for env, v in out.items()}


def _task_json(task: Task) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(task), default=str))


def save_environment(
    folder: str | Path,
    tasks: Sequence[Task],
    change: EnvChange,
    *,
    benchmark: str,
    domain: EnvironmentHooks,
    seed: int = 0,
) -> Path:
    """Write ``folder/environment.json`` (atomically): the change, the changed tasks and the
    content version of every changed task's environment. Paths inside `folder` (the copies a
    change wrote) are stored relative to it, so the folder can be moved."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": ENVIRONMENT_FORMAT,
        "benchmark": benchmark,
        "domain": domain.name,
        "seed": int(seed),
        "change": asdict(change),
        "versions": {t.task_id: domain.environment_version(t) for t in tasks},
        "tasks": [_task_json(t) for t in tasks],
    }
    path = out / ENVIRONMENT_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False)
    text = text.replace(json.dumps(str(out.resolve()))[1:-1], FOLDER_TOKEN)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class ChangedEnvironment:
    """A changed environment read back from its folder."""

    folder: Path
    benchmark: str
    domain: str
    seed: int
    change: EnvChange
    tasks: tuple[Task, ...]
    versions: Mapping[str, str]

    @property
    def label(self) -> str:
        return f"{self.benchmark}:{self.change.family}"


def load_environment(folder: str | Path) -> ChangedEnvironment:
    """Read a folder written by `save_environment` (one clear error when it is not one)."""
    path = Path(folder)
    path = path / ENVIRONMENT_FILE if path.is_dir() else path
    if not path.is_file():
        raise EnvironmentChangeError(
            f"{folder} is not a changed environment (no {ENVIRONMENT_FILE}; write one with `cm-gym env change`)"
        )
    try:  # bounded (issue 33): size from stat before reading, nesting before parsing
        text = read_data_file(path, MAX_ENVIRONMENT_BYTES)
        text = text.replace(FOLDER_TOKEN, json.dumps(str(path.parent.resolve()))[1:-1])
        data = boundedjson.loads(
            text,
            max_bytes=len(text),  # the size cap applies to the file itself (read_data_file)
            max_depth=MAX_ENVIRONMENT_DEPTH,
            what=str(path),
            expect=dict,
        )
        if data.get("format") != ENVIRONMENT_FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, not {ENVIRONMENT_FORMAT!r}")
        change = data["change"]
        tasks = tuple(Task(**t) for t in data["tasks"])
        env = ChangedEnvironment(
            folder=path.parent,
            benchmark=str(data["benchmark"]),
            domain=str(data["domain"]),
            seed=int(data.get("seed", 0)),
            change=EnvChange(
                family=str(change["family"]),
                description=str(change["description"]),
                params=dict(change.get("params", {})),
                touched_envs=tuple(change.get("touched_envs", ())),
                rewritten_tasks=tuple(change.get("rewritten_tasks", ())),
            ),
            tasks=tasks,
            versions=dict(data.get("versions", {})),
        )
    except (OSError, ValueError, KeyError, TypeError, DataFileError) as exc:
        raise EnvironmentChangeError(f"{path} is not a readable changed environment: {exc}") from None
    return env
