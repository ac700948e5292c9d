"""DafnyBench loader: `data_root()/"dafny"` with ``ground_truth/NAME.dfy`` and the matching
``hints_removed/NAME.dfy`` (see that folder's README). Loading needs no verifier."""

from __future__ import annotations

import functools
from pathlib import Path

from cm_gym.domains.dafny.program import program_features
from cm_gym.paths import data_root
from cm_gym.types import CmGymError, Task


class DafnyLayoutError(CmGymError):
    """The Dafny folder is missing or not in the expected layout."""


def dafny_root() -> Path:
    """`data_root()/"dafny"`, checked for the two sub-folders."""
    root = data_root() / "dafny"
    for sub in ("ground_truth", "hints_removed"):
        if not (root / sub).is_dir():
            raise DafnyLayoutError(f"{root} is not a DafnyBench folder (missing {sub}/)")
    return root


def project_of(filename: str) -> str:
    """The upstream project a DafnyBench file came from (its env id): the part before ``_tmp_``."""
    stem = filename[:-4] if filename.endswith(".dfy") else filename
    return stem.split("_tmp_", 1)[0] or stem


def _prompt(program: str, members: list[str]) -> str:
    names = ", ".join(members[:8]) or "its members"
    return (
        "Add proof annotations — loop invariants, assertions and decreases clauses, each on its own "
        "line and nothing else (no assume, no changed lines) — so that this Dafny program verifies "
        f"with Dafny 2.3 (`dafny /compile:0`). Members: {names}. Return the whole annotated program.\n\n"
        f"```dafny\n{program}\n```"
    )


def _family(feats: dict[str, object]) -> str:
    if feats["has_loop"]:
        return "loops"
    if "lemma" in feats["member_kinds"]:  # type: ignore[operator]
        return "lemmas"
    return "recursion" if feats["has_recursion"] else "straight-line"


@functools.lru_cache(maxsize=4)
def _load(root_text: str) -> tuple[Task, ...]:
    root = Path(root_text)
    names = sorted(
        p.name for p in (root / "hints_removed").glob("*.dfy") if (root / "ground_truth" / p.name).exists()
    )
    tasks = []
    for i, name in enumerate(names):
        program = (root / "hints_removed" / name).read_text(encoding="utf-8", errors="replace")
        truth = (root / "ground_truth" / name).read_text(encoding="utf-8", errors="replace")
        feats = program_features(program, name)
        tasks.append(
            Task(
                task_id=f"dafny-{i:04d}",
                domain="dafny",
                prompt=_prompt(program, list(feats["members"])),  # type: ignore[call-overload]
                env_id=f"dafny/{project_of(name)}",
                reference=truth,
                context="",
                family=_family(feats),
                features=feats,
                meta={"program": program, "file": name, "hints_identical": program == truth},
            )
        )
    return tuple(tasks)


def load_dafny_tasks(root: str | Path | None = None, limit: int | None = None) -> list[Task]:
    """DafnyBench tasks, sorted by file name (ids ``dafny-0000`` …)."""
    tasks = list(_load(str(Path(root) if root else dafny_root())))
    return tasks[:limit] if limit is not None else tasks
