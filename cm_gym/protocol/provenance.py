"""What produced a result: the ``provenance`` block of ``results.json`` and ``training.json``.

cm_gym's version and git commit (when it runs from a checkout; ``dirty`` when the tree has
uncommitted changes), Python and library versions, the command line, the data root, and a content
hash of each split (`cm_gym.core.types.task_digest`), so two results files can be compared knowing
whether they ran the same code on the same tasks.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from cm_gym.core.types import Task, task_digest

#: The command line being run, when it is not the process's own (`cm_gym.cli.main(argv)`).
COMMAND: list[str] | None = None
#: Distributions whose versions change results or their speed.
LIBRARIES = (
    "gymnasium",
    "stable-baselines3",
    "sb3-contrib",
    "torch",
    "numpy",
    "scikit-learn",
    "sqlglot",
    "z3-solver",
    "python-sat",
    "openai",
    "matplotlib",
)


@lru_cache(maxsize=1)
def git_commit() -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout cm_gym runs from, None when it is not a
    git checkout (an installed wheel) or git is unavailable."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        run = lambda *a: subprocess.run(  # noqa: E731
            ["git", "-C", str(root), *a], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        sha = run("rev-parse", "HEAD")
        dirty = bool(run("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": dirty}


def library_versions(names: Iterable[str] = LIBRARIES) -> dict[str, str | None]:
    """Installed version of each distribution (None when it is not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def data_root_or_none() -> str | None:
    """The real-data folder in use, or None when there is none (generated benchmarks)."""
    from cm_gym.core.paths import DataNotFoundError, data_root

    try:
        return str(data_root().resolve())
    except DataNotFoundError:
        return None


def split_digests(split: Any, tasks: Mapping[str, Task]) -> dict[str, dict[str, Any]]:
    """``{part: {"tasks": n, "sha256": content hash}}`` for build / train / validation / eval."""
    out = {}
    for part in ("build", "train", "validation", "eval"):
        ids: Sequence[str] = getattr(split, part)
        out[part] = {"tasks": len(ids), "sha256": task_digest(tasks[i] for i in ids)}
    return out


def provenance(
    split: Any = None, tasks: Mapping[str, Task] | None = None, argv: Sequence[str] | None = None
) -> dict[str, Any]:
    """The provenance block (see the module docstring)."""
    from cm_gym.core.version import __version__

    return {
        "cm_gym": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "libraries": library_versions(),
        "command": shlex.join(argv if argv is not None else COMMAND or sys.argv),
        "cwd": os.getcwd(),
        "data_root": data_root_or_none(),
        "splits": split_digests(split, tasks) if split is not None and tasks is not None else None,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
