"""DafnyBench loader: `data_root()/"dafny"` with ``ground_truth/NAME.dfy`` and the matching
``hints_removed/NAME.dfy`` (see that folder's README). Loading needs no verifier.

A pair whose files cannot be read (not regular files, not UTF-8) is refused with the reason and
the rest load. A pair whose ground truth is not its hints-removed program plus proof annotations
(`annotations.extract_annotations`: upstream's hint removal sometimes removed program text, or the
ground truth adds ``decreases *`` to a method the program does not declare non-terminating) is
dropped with the checker's reason: its reference could never be a valid action, so no task is
served that no action can solve. Task ids (``dafny-NNNN``) number every pair of the folder, so
they stay the same when a pair is refused or dropped."""

from __future__ import annotations

import functools
from pathlib import Path

from cm_gym.core.paths import data_root
from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import LoadReport, refused_message
from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations
from cm_gym.domains.dafny.program import program_features


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


def _read(path: Path) -> str:
    if not path.is_file():
        raise OSError(f"{path}: not a regular file")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OSError(f"{path}: not UTF-8 text (byte {exc.start})") from None


@functools.lru_cache(maxsize=4)
def _load(root_text: str) -> tuple[tuple[Task, ...], LoadReport]:
    root = Path(root_text)
    names = sorted(
        p.name for p in (root / "hints_removed").glob("*.dfy") if (root / "ground_truth" / p.name).exists()
    )
    tasks = []
    report = LoadReport()
    for i, name in enumerate(names):
        try:
            program = _read(root / "hints_removed" / name)
            truth = _read(root / "ground_truth" / name)
        except OSError as exc:
            report.refused.append((str(root / "hints_removed" / name), str(exc)))
            continue
        feats = program_features(program, name)
        try:
            extract_annotations(program, truth)
        except AnnotationError as exc:
            task_id = f"dafny-{i:04d}"
            report.dropped.append(
                (task_id, f"{name}: the ground truth is not the program plus proof annotations ({exc})")
            )
            report.family_of[task_id] = _family(feats)
            continue
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
    return tuple(tasks), report


def load_dafny_tasks(
    root: str | Path | None = None, limit: int | None = None, report: LoadReport | None = None
) -> list[Task]:
    """DafnyBench tasks, sorted by file name (ids ``dafny-0000`` …); `report` collects refused
    files and dropped pairs instead of raising (see the module docstring)."""
    tasks, seen = _load(str(Path(root) if root else dafny_root()))
    if seen.refused and report is None:
        raise DafnyLayoutError(refused_message(list(seen.refused), "DafnyBench"))
    if report is not None:
        for part in ("refused", "dropped"):
            getattr(report, part).extend(getattr(seen, part))
        report.family_of.update(seen.family_of)
    out = list(tasks)
    return out[:limit] if limit is not None else out
