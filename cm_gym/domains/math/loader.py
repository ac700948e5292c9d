"""miniF2F-rocq loader: ``data_root()/"minif2f-rocq"/"valid"/*.v``, one theorem per file.

A task is one statement: the prompt shows the statement (as the file states it, up to the
theorem) and asks for a proof script; `meta` carries the parsed prefix for the checker; the
reference is the portfolio's verified proof from the shipped table (`portfolio`), never read from
the data folder. ``proved_only=True`` (the benchmark default) keeps the statements with a
reference; ``False`` keeps every statement that parses (for real LLMs, which need no reference —
those that do not load with the standard library are then scored 0 with status "error" by the
world model). Files that are not one vetted statement are skipped with a warning. Loading needs no
Coq installation.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from cm_gym.domains.math.features import family_of, statement_features
from cm_gym.domains.math.proofs import read_table
from cm_gym.domains.math.statement import Statement, StatementError, parse_statement
from cm_gym.paths import data_root
from cm_gym.types import CmGymError, Task

logger = logging.getLogger(__name__)

SUBDIR = ("minif2f-rocq", "valid")
ACTION_INSTRUCTIONS = (
    "Prove this theorem with Coq 8.16 and its standard library only. Return the proof script: "
    "optional `Require Import` lines of standard-library modules (e.g. Lia, Lra, Psatz), then the "
    "tactics, one sentence per line — no `Proof.`/`Qed.`, no `Admitted`, `admit` or new axioms."
)


class MiniF2FLayoutError(CmGymError):
    """The miniF2F folder is missing or holds no ``.v`` statements."""


def minif2f_root(root: str | Path | None = None) -> Path:
    """The folder of ``.v`` statements: `root` itself, or ``root/minif2f-rocq/valid``, or
    ``root/valid`` (default root: the data folder)."""
    base = Path(root) if root is not None else data_root()
    for cand in (base, base.joinpath(*SUBDIR), base / SUBDIR[1]):
        if cand.is_dir() and any(cand.glob("*.v")):
            return cand
    raise MiniF2FLayoutError(f"no miniF2F-rocq statements (*.v) under {base} (looked in {'/'.join(SUBDIR)})")


def _prompt(statement: Statement) -> str:
    return f"{ACTION_INSTRUCTIONS}\n\n```coq\n{statement.source}\n```"


@functools.lru_cache(maxsize=8)
def _load(folder: str, proved_only: bool) -> tuple[Task, ...]:
    proofs = read_table().get("proofs", {})
    tasks: list[Task] = []
    skipped = 0
    for path in sorted(Path(folder).glob("*.v")):
        try:
            statement = parse_statement(path.read_text(encoding="utf-8", errors="replace"), path.stem)
        except (StatementError, OSError) as exc:
            skipped += 1
            logger.warning("skipping %s: %s", path.name, exc)
            continue
        reference = proofs.get(statement.name, "")
        if proved_only and not reference:
            continue
        family = family_of(path.stem)
        tasks.append(
            Task(
                task_id=f"minif2f-{path.stem}",
                domain="math",
                prompt=_prompt(statement),
                env_id=f"minif2f/{family}",
                reference=reference,
                family=family,
                features=statement_features(statement, path.stem),
                meta={
                    "file": path.name,
                    "theorem": statement.name,
                    "prefix": statement.prefix,
                    "theorem_sentence": statement.theorem,
                    "declared": list(statement.declared),
                    "requires": list(statement.requires),
                    "proved": bool(reference),
                },
            )
        )
    if skipped:
        logger.warning("miniF2F: %d file(s) skipped (not one vetted statement)", skipped)
    return tuple(tasks)


def load_minif2f_tasks(
    root: str | Path | None = None, *, proved_only: bool = True, limit: int | None = None
) -> list[Task]:
    """miniF2F-rocq tasks sorted by file name (ids ``minif2f-<file stem>``); see module doc."""
    tasks = list(_load(str(minif2f_root(root)), bool(proved_only)))
    return tasks[:limit] if limit is not None else tasks
