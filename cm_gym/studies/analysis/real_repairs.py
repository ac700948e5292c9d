"""Real repairs, fairly admitted (issue 32 items 3–4): for each recorded Spider system, which of
its real failed drafts one local edit or another published system's output repairs, and which of
those repairs survive the check on several database instances.

For every task a system published an output for, its output (the real draft) is checked by the SQL
world model on the task's database. Each failure gets three kinds of candidate a⁺:

* ``base`` — every edit of the base grammar (`edits.raw_edits`), and whether one of the first
  K = 4 repairs it;
* ``new`` — every edit of the kinds real drafts need (`edits_local`, value casing from the task's
  database), and whether one of the first K of the extended list does;
* ``recorded`` — the other published systems' outputs for the same task (real LLM text).

A candidate that returns the gold result on the task's database is a *repair on one instance*
(today's admission). It is *admitted on several* when it also matches the gold on every generated
variant of the database where the gold is well-defined (`SQLEvaluator.confirm_contrast`); the
others are the *accidental repairs refused*. The first drafts right on the task's database are
also checked on the variants (the final verdict on several instances, test-suite style). CPU (process) time is measured over the repair pairs:
one check of a⁺ on the task's database (what admission costs today) against the confirmation on
the variants (a⁺ and a⁻ on each, plus the gold's well-definedness, once per variant and gold).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.domains.sql.edits import raw_edits
from cm_gym.domains.sql.edits_local import LOCAL_KINDS, extended_edits
from cm_gym.domains.sql.evaluator import SQLEvaluator
from cm_gym.domains.sql.values import column_values
from cm_gym.llm.recordings import load_recordings

logger = logging.getLogger(__name__)

SOURCES = ("base", "new", "recorded")


@dataclass
class Pair:
    """One repair on the task's database: the real draft a⁻, the candidate a⁺ and its verdicts."""

    task_id: str
    source: str  # "base" | "new" | "recorded"
    kind: str  # the contrast key (edits) or the system that wrote a⁺ (recorded)
    a_minus: str
    a_plus: str
    confirmed: bool = True
    instances: dict[str, int] = field(default_factory=dict)


@dataclass
class SystemRepairs:
    """The figures of one system (see the module docstring); ``*_k`` within the first K edits."""

    system: str
    drafts: int = 0
    failures: int = 0
    solved_one: int = 0  # first drafts right on the task's database (today's verdict)
    solved_several: int = 0  # ... and on every variant where the gold is well-defined
    repaired: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))
    repaired_k: dict[str, int] = field(default_factory=lambda: {"base": 0, "extended": 0})
    admitted_one: int = 0  # failures with a repair on the task's database (any source)
    admitted_several: int = 0  # failures with a repair that also holds on every variant
    pairs: list[Pair] = field(default_factory=list)
    seconds_one: float = 0.0  # CPU s of checking each repair pair's a⁺ on the task's database
    seconds_several: float = 0.0  # CPU s of confirming each pair on the variants (a⁺ and a⁻)

    def refused(self, source: str | None = None) -> int:
        return sum(not p.confirmed for p in self.pairs if source is None or p.source == source)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["refused"] = {s: self.refused(s) for s in SOURCES} | {"all": self.refused()}
        return out


def _first_fix(evaluator: SQLEvaluator, state: AgentState, texts: Sequence[str]) -> list[int]:
    return [i for i, t in enumerate(texts) if evaluator.check(state, Action(t)).solved]


def system_repairs(
    system: str,
    tasks: Sequence[Task],
    evaluator: SQLEvaluator,
    *,
    k: int = 4,
    systems: Sequence[str] = (),
) -> SystemRepairs:
    """The figures of `system` on `tasks` (`evaluator` must have ``instances`` > 0)."""
    domain = get_domain("sql")
    rows = load_recordings("spider")
    out = SystemRepairs(system)
    for task in tasks:
        key = domain.recording_key(task) or ""
        mine = rows.get(key, system)
        if mine is None:
            continue
        out.drafts += 1
        state = AgentState(task)
        draft = domain.parse_action(mine.text)
        if evaluator.check(state, Action(draft)).solved:
            out.solved_one += 1
            report = evaluator.instance_report(state, draft)
            out.solved_several += report is None or report.matches
            continue
        out.failures += 1
        types = (task.features or {}).get("column_types") or {}
        path = (task.meta or {}).get("db_path") or ""
        base = raw_edits(draft, types)
        extended = extended_edits(draft, types, lambda t, c, p=path: column_values(p, t, c))
        new = [e for e in extended if e.unit.split(":")[0] in LOCAL_KINDS]
        others = [
            (s, domain.parse_action(o.text)) for s in systems if s != system and (o := rows.get(key, s))
        ]
        fixed_base = _first_fix(evaluator, state, [e.text for e in base])
        fixed_new = _first_fix(evaluator, state, [e.text for e in new])
        fixed_ext = _first_fix(evaluator, state, [e.text for e in extended[:k]])
        fixed_rec = _first_fix(evaluator, state, [t for _, t in others])
        out.repaired["base"] += bool(fixed_base)
        out.repaired["new"] += bool(fixed_new)
        out.repaired["recorded"] += bool(fixed_rec)
        out.repaired_k["base"] += any(i < k for i in fixed_base)
        out.repaired_k["extended"] += bool(fixed_ext)
        pairs = [Pair(task.task_id, "base", base[i].change.key, draft, base[i].text) for i in fixed_base]
        pairs += [Pair(task.task_id, "new", new[i].change.key, draft, new[i].text) for i in fixed_new]
        pairs += [Pair(task.task_id, "recorded", others[i][0], draft, others[i][1]) for i in fixed_rec]
        cpu = time.process_time()
        for pair in pairs:  # what admission costs today: a⁺ checked once, on the task's database
            evaluator.check(state, Action(pair.a_plus))
        out.seconds_one += time.process_time() - cpu
        cpu = time.process_time()
        for pair in pairs:
            verdict = evaluator.confirm_contrast(state, draft, pair.a_plus) or {"confirmed": True}
            pair.confirmed = bool(verdict["confirmed"])
            pair.instances = {k_: int(v) for k_, v in verdict.items() if k_ != "confirmed"}
        out.seconds_several += time.process_time() - cpu
        out.pairs.extend(pairs)
        out.admitted_one += bool(pairs)
        out.admitted_several += any(p.confirmed for p in pairs)
    logger.info("%s: %d failures, %d repaired on one instance, %d on several", system, out.failures,
                out.admitted_one, out.admitted_several)  # fmt: skip
    return out


def spider_tasks() -> list[Task]:
    """The SpiderSQL tasks (data root's ``spider``)."""
    return list(get_benchmark("SpiderSQL").load())
