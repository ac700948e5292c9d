"""Tasks whose hidden reference cannot be read: how `check_domain` proves that a domain's
memory hooks (edit operators, distil, condition predicates, apply_contrast) never peek at it."""

from __future__ import annotations

import dataclasses
from typing import Any

from cm_gym.core.types import Task

__all__ = ["ReferenceReadError", "guarded"]


class ReferenceReadError(AssertionError):
    """Raised when a guarded task's hidden reference is read."""


class _GuardedTask(Task):
    """A Task whose ``reference`` raises (and is logged) when read. Equality and hashing use the
    task id only, so caches keyed on tasks do not count as reads."""

    def __getattribute__(self, name: str) -> Any:
        if name == "reference":
            try:
                log = object.__getattribute__(self, "_reads")
            except AttributeError:  # a dataclasses.replace() copy: its reference was set explicitly
                return object.__getattribute__(self, name)
            log.append(object.__getattribute__(self, "_context"))
            raise ReferenceReadError("task.reference is hidden here")
        return object.__getattribute__(self, name)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return hash(("guarded", self.task_id))

    def __repr__(self) -> str:
        return f"GuardedTask({self.task_id!r})"


def guarded(task: Task, context: str, log: list[str]) -> Task:
    """A copy of `task` whose reference raises `ReferenceReadError` and appends `context` to `log`."""
    copy = _GuardedTask(**{f.name: getattr(task, f.name) for f in dataclasses.fields(Task)})
    object.__setattr__(copy, "_reads", log)
    object.__setattr__(copy, "_context", context)
    return copy
