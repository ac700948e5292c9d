"""Environments that change: the part of the Domain contract that versions a task's environment
and applies a domain's documented family of changes to copies of it (paper App. A: "a record can
become stale when tools, schemas, or requirements change").

Three hooks, mixed into `cm_gym.domains.base.Domain` (a domain overrides what it knows better):

* `environment_version(task)` — a content version of the task's environment (a schema and data
  digest, a tool version, a test-suite hash). Records carry the version they were last verified
  against, and retrieval never offers a record whose environment now has another version
  (`cm_gym.memory.freshness`). Default: a hash of the domain name, the environment id and the
  environment context the task shows the agent.
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

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.types import CmGymError, Task

ENVIRONMENT_FILE = "environment.json"
ENVIRONMENT_FORMAT = "cm_gym.environment/1"


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


class EnvironmentHooks:
    """The environment hooks of the Domain contract (mixed into `Domain`)."""

    name: str

    def environment_version(self, task: Task) -> str:
        """A content version of `task`'s environment; equal versions mean the world model sees
        the same environment. Default: the domain name, the environment id and its context."""
        return digest(self.name, task.env_id, task.context)

    def change_families(self) -> Mapping[str, ChangeFamily]:
        """The domain's documented change families by name (none by default)."""
        return {}

    def adaptation_edits(self, task: Task, action: str) -> list[Any]:
        """Local edits (`cm_gym.domains.base.Edit`) adapting `action` to `task`'s environment as
        it is now; reference-free. Default: none."""
        return []

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
    content version of every changed task's environment."""
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
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False), encoding="utf-8")
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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
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
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EnvironmentChangeError(f"{path} is not a readable changed environment: {exc}") from None
    return env
