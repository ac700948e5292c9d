"""Dafny environments that change: the Dafny domain's change family, content version and
adaptation edit.

The world model of a Dafny task is its given program (``meta["program"]``: the specification —
signatures, requires / ensures, bodies — that an action may only annotate) checked by the Dafny
verifier. The change returns changed *copies* (program, prompt, reference, features) and records
it in ``meta["environment_change"]``; nothing is written to disk.

* ``lemma_renamed`` (spec) — the first lemma, method, function or predicate the program declares
  (its "members" feature order) is renamed ``<name>_v2`` everywhere in the program and the
  reference: an annotated program written against the old specification is no longer "the given
  program plus annotations" and is refused.

Adaptation edit (re-verification only): a name the action uses that the given program no longer
declares → the declared name that extends it (``Foo`` → ``Foo_v2``), every occurrence.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit
from cm_gym.domains.environment import (
    CHANGE_META,
    ChangeFamily,
    EnvChange,
    change_marker,
    digest,
    touched_envs,
)

_DECL = re.compile(r"\b(?:lemma|method|function|predicate)\s+(?:\{[^}]*\}\s*)?([A-Za-z_][\w']*)")


@lru_cache(maxsize=1)
def _dafny_version() -> str:
    exe = shutil.which("dafny")
    if exe is None:
        return "absent"
    try:
        out = subprocess.run([exe, "/version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (
        (out.stdout or out.stderr).strip().splitlines()[0]
        if (out.stdout or out.stderr).strip()
        else "unknown"
    )


def environment_version(name: str, task: Task) -> str:
    """The env id, the verifier's version and a recorded change (same for a whole project)."""
    return digest(name, task.env_id, _dafny_version(), change_marker(task))


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\w']){re.escape(old)}(?![\w'])", new, text)


def _lemma_renamed(tasks: Sequence[Task], folder: Path, seed: int) -> tuple[list[Task], EnvChange]:
    out, changed = [], []
    for task in tasks:
        program = str((task.meta or {}).get("program", ""))
        declared = _DECL.findall(program)
        if not declared or declared[0] == "Main":
            declared = [d for d in declared if d != "Main"]
        if not declared:
            out.append(task)
            continue
        old = declared[0]
        new = f"{old}_v2"
        members = [new if m == old else m for m in task.features.get("members", ())]
        meta = {
            **task.meta,
            "program": _rename(program, old, new),
            CHANGE_META: {"renamed": f"{old} -> {new}"},
        }
        out.append(
            replace(
                task,
                prompt=_rename(task.prompt, old, new),
                reference=_rename(task.reference, old, new),
                features={**task.features, "members": members},
                meta=meta,
            )
        )
        changed.append(task.task_id)
    return out, EnvChange(
        "lemma_renamed",
        f"a declared member renamed <name>_v2 in {len(changed)} programs",
        {"seed": seed},
        touched_envs(out),
        tuple(changed),
    )


def adaptation_edits(task: Task, action: str) -> list[Edit]:
    """A name the given program no longer declares → the declared name that extends it."""
    declared = set(_DECL.findall(str((task.meta or {}).get("program", ""))))
    edits: list[Edit] = []
    for name in dict.fromkeys(_DECL.findall(action)):
        if name in declared:
            continue
        target = next((d for d in sorted(declared, key=len) if d.startswith(name) and d != name), None)
        if target is not None:
            edits.append(
                Edit(_rename(action, name, target), f"name:{name}", f"{name} is now declared as {target}")
            )
    return edits


CHANGE_FAMILIES: dict[str, ChangeFamily] = {
    "lemma_renamed": ChangeFamily(
        "lemma_renamed",
        "spec",
        "a program's first declared member is renamed <name>_v2 (Dafny)",
        _lemma_renamed,
    )
}
