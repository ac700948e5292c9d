"""SQL samples for `cm_gym.studies.analysis.real_errors`: the published Spider predictions of a real
system, and the simulated LLM's first drafts, on the SpiderSQL tasks.

Both sides go through the same steps: the answer is executed by the SQL world model
(`SQLEvaluator`, which accepts a column permutation — so it is a little more lenient than the
data folder's own check, whose verdicts are kept in the notes for comparison); a failure is
classified by `classify_sql` against the gold (``does_not_run`` when SQLite refuses it); and,
with `repair`, every edit of `SQLDomain.edit_operators` is executed until one passes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.recordings import load_recordings, spider_key
from cm_gym.studies.analysis.real_errors import (
    ErrorSample,
    Failure,
    attach_repairs,
    evaluator_check,
    simulated_drafts,
)
from cm_gym.studies.analysis.real_errors_sql import SQL_KINDS, classify_sql

logger = logging.getLogger(__name__)


def tasks(limit: int | None = None) -> list[Task]:
    """The SpiderSQL tasks (data root's ``spider``) that have recorded predictions, in order;
    the first `limit` only when given."""
    recorded = set(load_recordings("spider").keys)
    out = [t for t in get_benchmark("SpiderSQL").load(None) if spider_key(t.env_id, t.prompt) in recorded]
    return out[:limit] if limit is not None else out


def _sample(
    source: str, answers: Sequence[tuple[Task, str]], evaluator: Any, repair: bool | int
) -> ErrorSample:
    """Execute every answer; classify each failure; with `repair` (True, or a cap on the
    failures checked), check which one grammar edit repairs."""
    sample = ErrorSample("sql", source, SQL_KINDS, n_tasks=len(answers))
    failed: list[tuple[Task, str]] = []
    for task, sql in answers:
        outcome = evaluator.check(AgentState(task=task), Action(sql))
        if outcome.solved:
            sample.n_solved += 1
            continue
        diff = classify_sql(sql, task.reference, runs=outcome.status == "ok")
        detail = "; ".join(diff.details)[:300]
        sample.failures.append(Failure(task.task_id, diff.kinds, diff.local, None, detail, diff.subkinds))
        failed.append((task, sql))
    if repair is not False:
        limit = None if repair is True else int(repair)
        attach_repairs(sample, failed, get_domain("sql"), evaluator_check(evaluator), limit=limit)
    return sample


def real_sample(
    system: str, task_list: Sequence[Task], *, repair: bool | int = True, evaluator: Any = None, **_: Any
) -> ErrorSample:
    """The real system's published prediction for every task (`RecordingsError` for an unknown
    system), executed and classified."""
    rows = load_recordings("spider").for_system(system)
    evaluator = evaluator or get_domain("sql").make_evaluator()
    answers = [(t, rows[k].text) for t in task_list if (k := spider_key(t.env_id, t.prompt)) in rows]
    sample = _sample(f"real:{system}", answers, evaluator, repair)
    sample.notes["data_folder_verdicts"] = dict(
        Counter(rows[spider_key(t.env_id, t.prompt)].verdict for t, _ in answers)
    )
    return sample


def simulated_sample(
    profile: Any,
    task_list: Sequence[Task],
    *,
    seeds: Sequence[int] = (0,),
    repair: bool | int = True,
    evaluator: Any = None,
    **_: Any,
) -> ErrorSample:
    """The simulated LLM's first drafts under `profile` (None: the default model) for every task
    and seed (each (seed, task) pair is one answer), executed and classified."""
    evaluator = evaluator or get_domain("sql").make_evaluator()
    answers = [(task, draft) for _seed, task, draft in simulated_drafts(task_list, profile, seeds)]
    name = getattr(profile, "name", profile) or "default"
    sample = _sample(f"simulated:{name}", answers, evaluator, repair)
    sample.notes["seeds"] = list(seeds)
    return sample
