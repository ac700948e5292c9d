"""miniF2F-rocq loader: ``data_root()/"minif2f-rocq"/"valid"/*.v``, one theorem per file.

A task is one statement: the prompt shows the statement (as the file states it, up to the
theorem) and asks for a proof script; `meta` carries the parsed prefix for the checker; the
reference is the portfolio's verified proof from the shipped table (`proofs`), attached only when
the theorem's name *and* the digest of its statement match what the proof was checked against.
``proved_only=True`` (the benchmark default) keeps the statements with a reference and drops the
others (listed in `report.dropped` with the portfolio's reason); ``False`` keeps every statement
that parses (for real LLMs, which need no reference — one that does not load with the standard
library is then scored 0 with status "error" by the world model). A file that is not one vetted
statement is refused: listed in `report.refused` when a `LoadReport` is passed, else one error
listing every such file (the data-root contract of `cm_gym.domains.registry`). Loading needs no Coq.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from cm_gym.core.paths import data_root
from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import LoadReport, refused_message
from cm_gym.domains.math.features import family_of, statement_features
from cm_gym.domains.math.proofs import read_table
from cm_gym.domains.math.statement import Statement, StatementError, parse_statement

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
def _load(folder: str) -> tuple[tuple[Task, ...], tuple[tuple[str, str], ...]]:
    """Every statement of `folder` as a task (reference "" when none matches), and the refused files."""
    table = read_table()
    proofs, digests = table.get("proofs", {}), table.get("statement_digests", {})
    tasks: list[Task] = []
    refused: list[tuple[str, str]] = []
    for path in sorted(Path(folder).glob("*.v")):
        if not path.is_file():
            refused.append((str(path), f"{path.name}: not a regular file"))
            continue
        try:
            statement = parse_statement(path.read_text(encoding="utf-8", errors="replace"), path.stem)
        except (StatementError, OSError) as exc:
            refused.append((str(path), f"{path.name}: {exc}"))
            continue
        matches = digests.get(statement.name) == statement.digest
        reference = proofs.get(statement.name, "") if matches else ""
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
                    "digest": statement.digest,
                },
            )
        )
    return tuple(tasks), tuple(refused)


def load_minif2f_tasks(
    root: str | Path | None = None,
    *,
    proved_only: bool = True,
    limit: int | None = None,
    report: LoadReport | None = None,
) -> list[Task]:
    """miniF2F-rocq tasks sorted by file name (ids ``minif2f-<file stem>``); see module doc."""
    everything, refused = _load(str(minif2f_root(root)))
    if refused:
        if report is None:
            raise MiniF2FLayoutError(refused_message(list(refused), "miniF2F statement"))
        report.refused.extend(refused)
    tasks = list(everything)
    if proved_only:
        unproved = read_table().get("unproved", {})
        for t in tasks:
            if not t.reference:
                why = unproved.get(t.meta["theorem"], "no verified reference proof for this statement")
                if report is not None:
                    report.dropped.append((t.task_id, f"no reference: {why}"))
                    report.family_of[t.task_id] = t.family
        dropped = sum(not t.reference for t in tasks)
        if dropped and report is None:
            logger.info("miniF2F: %d statement(s) without a verified reference left out", dropped)
        tasks = [t for t in tasks if t.reference]
    return tasks[:limit] if limit is not None else tasks
