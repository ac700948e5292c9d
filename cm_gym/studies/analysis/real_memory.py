"""Memory from real mistakes: Modules I–II on a recorded system's real wrong drafts, and whether a
stored correction of one real mistake fixes another (issue 21, items 2 and 3).

* `construct_from_recorded` — the real first draft of every build task (``recorded:<system>``,
  `cm_gym.llm.recorded`), one decision and no construction-time reuse, so every expanded action
  is a real draft. Each real failure gets Module I's K local alternatives (the simulated
  GENERATE_LOCAL_ALTERNATIVES on the real draft, then the domain's edit operators), each checked
  by the world model; improvements are distilled, admitted and stored (Module II). It counts real
  failures, those some alternative repairs (solved) or improves, the records formed and their
  conditions.
* `heldout_transfer` — on held-out tasks, the real first draft of `system` (the store's system or
  another one) is revised with each record of the store that could be shown, by the recorded
  LLM's (simulated, calibrated) reviser: (a) the top-k retrieved records, (b) every eligible
  record (condition holds, another task), (c) every record, conditions ignored. Coverage = share
  of real failures with such a record; fix rate = share of covered failures where some revision
  passes; their product is the share of real failures some record fixes.

World-model checks are memoised per (task, action): a revision that returns the draft, or the same
action twice, costs nothing more.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cm_gym.agent import BaseAgent, Cost
from cm_gym.core.splits import make_split
from cm_gym.core.types import Action, AgentState, Evaluator, Outcome, Task, check_all
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.factory import make_llm
from cm_gym.llm.recorded import recorded_task_ids
from cm_gym.memory.alternatives import recorded_alternatives
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.retrieval import Retriever, record_view
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.memory.store import RecordStore

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


class MemoEvaluator:
    """An evaluator memoised per (task id, action text) that logs, per task, every action it was
    asked to check with its outcome (memo hits included), in order."""

    def __init__(self, inner: Evaluator) -> None:
        self.inner = inner
        self.memo: dict[tuple[str, str], Outcome] = {}
        self.log: dict[str, list[tuple[str, Outcome]]] = {}

    def check(self, state: AgentState, action: Action) -> Outcome:
        return self.check_many(state, [action])[0]

    def check_many(self, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
        tid = state.task.task_id
        todo = list(dict.fromkeys(a.text for a in actions if (tid, a.text) not in self.memo))
        if todo:
            for text, out in zip(todo, check_all(self.inner, state, [Action(t) for t in todo]), strict=True):
                self.memo[(tid, text)] = out
        outcomes = [self.memo[(tid, a.text)] for a in actions]
        self.log.setdefault(tid, []).extend((a.text, o) for a, o in zip(actions, outcomes, strict=True))
        return outcomes

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


def recording_kind(benchmark: str) -> str:
    """The recordings folder of a benchmark ("spider", "dafny", "humaneval")."""
    return {"SpiderSQL": "spider", "Dafny": "dafny", "CodeHumanEvalSynth": "humaneval"}.get(
        benchmark, benchmark.lower()
    )


def split_ids(
    benchmark: str,
    side: str,
    *,
    split_seed: int = 12345,
    data: str | Path | None = None,
    split: str | None = None,
) -> list[str]:
    """The task ids of one side ("build", "train", "eval") of the benchmark's split `split` (None:
    its default — Spider: tasks sampled by seed, App. D.2; Dafny by project, HumanEval by
    problem; "databases": environments apart)."""
    spec = get_benchmark(benchmark)
    split_ = make_split(spec.load(data), seed=split_seed, kind=spec.split_kind(split))
    return list(getattr(split_, side))


def _tasks(
    benchmark: str, system: str, ids: Sequence[str], data: str | Path | None
) -> tuple[list[Task], int]:
    """The tasks of `ids` that `system` published an output for, and how many it did not."""
    by_id = {t.task_id: t for t in get_benchmark(benchmark).load(data)}
    chosen = [by_id[i] for i in ids]
    covered = set(recorded_task_ids(system, chosen)[0])
    return [t for t in chosen if t.task_id in covered], len(chosen) - len(covered)


@dataclass
class ConstructionResult:
    """What Modules I–II made of one system's real failures (see the module docstring)."""

    benchmark: str
    system: str
    tasks: int
    excluded: int
    first_solved: int
    failures: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)
    snapshot: str = ""
    solved_ids: list[str] = field(default_factory=list)

    @property
    def repaired(self) -> int:
        return sum(f["repaired"] for f in self.failures)

    @property
    def improved(self) -> int:
        return sum(f["improved"] for f in self.failures)

    @property
    def conditioned(self) -> int:
        return sum(bool(r["condition"]) for r in self.records)

    def predicate_kinds(self) -> dict[str, int]:
        """How many records use each condition predicate kind."""
        kinds: Counter[str] = Counter()
        for r in self.records:
            kinds.update({p.split("(", 1)[0].strip() for p in r["condition"].split(" AND ") if p.strip()})
        return dict(kinds.most_common())

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            failures_n=len(self.failures),
            repaired_n=self.repaired,
            improved_n=self.improved,
            records_n=len(self.records),
            conditioned_n=self.conditioned,
            predicate_kinds=self.predicate_kinds(),
        )
        return out


def construct_from_recorded(
    benchmark: str,
    system: str,
    out_dir: str | Path,
    task_ids: Sequence[str] | None = None,
    *,
    K: int = 4,
    seed: int = 0,
    agent: str = "react",
    split_seed: int = 12345,
    data: str | Path | None = None,
    progress: Progress | None = None,
    real_alternatives: bool = False,
    evaluator_options: dict[str, Any] | None = None,
    edit_grammar: str | None = None,
) -> ConstructionResult:
    """Build memory from `system`'s real first drafts on `task_ids` (default: the build side of the
    standard split) into ``out_dir/store.sqlite`` and freeze ``out_dir/snapshot.sqlite``. With
    `real_alternatives`, Module I also takes the other published systems' outputs for the same
    task (``source="recorded"``); `evaluator_options` go to the world model (e.g. ``instances=10``:
    admission on several database instances); `edit_grammar="extended"` gives every task the
    SQL domain's item-4 local edits (``meta["sql_edit_grammar"]``)."""
    spec = get_benchmark(benchmark)
    domain = get_domain(spec.domain_name)
    ids = (
        task_ids if task_ids is not None else split_ids(benchmark, "build", split_seed=split_seed, data=data)
    )
    tasks, excluded = _tasks(benchmark, system, ids, data)
    if edit_grammar:
        tasks = [replace(t, meta={**t.meta, "sql_edit_grammar": edit_grammar}) for t in tasks]
    llm = make_llm(f"recorded:{system}", seed=seed, task_lookup={t.task_id: t for t in tasks})
    evaluator = MemoEvaluator(domain.make_evaluator(**(evaluator_options or {})))
    recorded = recorded_alternatives(domain, recording_kind(benchmark), system) if real_alternatives else None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("store.sqlite", "snapshot.sqlite"):
        for suffix in ("", "-wal", "-shm"):
            Path(str(out / name) + suffix).unlink(missing_ok=True)
    cfg = ConstructionConfig(K=K, reuse_policy="never", max_expansions=1, seed=seed)
    try:
        with RecordStore(out / "store.sqlite", domain=domain.name, benchmark=spec.name) as store:
            summary = build_memory(
                domain,
                tasks,
                store,
                llm,
                evaluator,
                cfg,
                agent_kind=agent,
                max_decisions=1,
                progress=progress,
                recorded_alternatives=recorded,
            )
            records = [
                {
                    "record_id": r.record_id,
                    "source_task_id": r.source_task_id,
                    "contrast_key": r.contrast_key,
                    "condition": r.condition,
                    "delta": r.delta,
                    "transform": r.transform,
                }
                for r in store.records
            ]
            store.freeze(out / "snapshot.sqlite", overwrite=True)
    finally:
        evaluator.close()
    result = ConstructionResult(benchmark, system, len(tasks), excluded, 0, records=records)
    result.rejected = dict(summary.rejected)
    result.snapshot = str(out / "snapshot.sqlite")
    for task in tasks:
        (_draft, first), *alternatives = evaluator.log[task.task_id]
        if first.solved:
            result.first_solved += 1
            result.solved_ids.append(task.task_id)
            continue
        result.failures.append(
            {
                "task_id": task.task_id,
                "status": first.status,
                "score": float(first.score),
                "alternatives": len(alternatives),
                "repaired": any(o.solved for _, o in alternatives),
                "improved": any(o.completed and o.score > first.score for _, o in alternatives),
            }
        )
    logger.info(
        "%s %s: %d real failures of %d drafts, %d repaired locally, %d records",
        benchmark, system, len(result.failures), len(tasks), result.repaired, len(records),
    )  # fmt: skip
    return result


@dataclass
class TransferResult:
    """Held-out coverage × fix rate of one store on one system's real failures."""

    benchmark: str
    store_system: str
    system: str
    tasks: int
    store_records: int
    failures: list[dict[str, Any]] = field(default_factory=list)

    def rate(self, scope: str) -> dict[str, float | int]:
        """Coverage, fix rate and their product for `scope` ("retrieved", "eligible", "any")."""
        n = len(self.failures)
        covered = sum(f[f"{scope}_shown"] > 0 for f in self.failures)
        fixed = sum(f[f"{scope}_fixed"] for f in self.failures)
        return {
            "failures": n,
            "covered": covered,
            "fixed": fixed,
            "coverage": covered / n if n else 0.0,
            "fix_rate": fixed / covered if covered else 0.0,
            "fixed_share": fixed / n if n else 0.0,
        }

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rates"] = {s: self.rate(s) for s in ("retrieved", "eligible", "any")}
        return out


def _try_records(
    agent: BaseAgent,
    evaluator: MemoEvaluator,
    state: AgentState,
    draft: str,
    shown: dict[str, list[Any]],
    scopes: Sequence[str],
) -> dict[str, Any]:
    """Per scope: how many records could be shown, and whether (and which) one fixes the draft.
    Each record is tried once (a revision, then a check when it changed the draft)."""
    verdicts: dict[str, bool] = {}

    def fixes(record: Any) -> bool:
        if record.record_id not in verdicts:
            revised = agent.revise(state, draft, record_view(record), Cost())
            changed = revised.strip() != draft.strip()
            verdicts[record.record_id] = changed and evaluator.check(state, Action(revised)).solved
        return verdicts[record.record_id]

    entry: dict[str, Any] = {"task_id": state.task.task_id}
    for scope in ("retrieved", "eligible", "any"):
        pool = shown[scope] if scope in scopes else []
        winner = next((r for r in pool if fixes(r)), None)
        entry[f"{scope}_shown"] = len(pool)
        entry[f"{scope}_fixed"] = winner is not None
        entry[f"{scope}_fixer"] = (
            {
                "record_id": winner.record_id,
                "source_task_id": winner.source_task_id,
                "contrast_key": winner.contrast_key,
            }
            if winner is not None
            else None
        )
    return entry


def heldout_transfer(
    benchmark: str,
    snapshot: str | Path,
    system: str,
    task_ids: Sequence[str] | None = None,
    *,
    store_system: str = "",
    k: int = 3,
    seed: int = 0,
    agent: str = "react",
    split_seed: int = 12345,
    data: str | Path | None = None,
    scopes: Sequence[str] = ("retrieved", "eligible", "any"),
    seen: bool = False,
    progress: Progress | None = None,
    revise: str = "llm",
) -> TransferResult:
    """Revise each real failure of `system` on `task_ids` (default: the eval side of the standard
    split) with the records of `snapshot` (see the module docstring). Tasks the store has records
    of are refused unless `seen` (then each task is offered only the *other* tasks' records: the
    optimistic, seen-environment reading). `revise="transform"` revises with each record's
    stored transform instead of the LLM (`BaseAgent`; a record without one changes nothing)."""
    spec = get_benchmark(benchmark)
    domain = get_domain(spec.domain_name)
    ids = task_ids if task_ids is not None else split_ids(benchmark, "eval", split_seed=split_seed, data=data)
    tasks, _ = _tasks(benchmark, system, ids, data)
    store = FrozenStore.open(snapshot)
    records = list(store.records)
    leaked = {r.source_task_id for r in records} & {t.task_id for t in tasks}
    if leaked and not seen:
        raise ValueError(f"the store holds records of held-out tasks: {sorted(leaked)[:5]}")
    llm = make_llm(f"recorded:{system}", seed=seed, task_lookup={t.task_id: t for t in tasks})
    evaluator = MemoEvaluator(domain.make_evaluator())
    agent_ = BaseAgent(llm, domain, evaluator, kind=agent, revise=revise)
    retriever = Retriever(store, domain, k=k)
    result = TransferResult(benchmark, store_system, system, len(tasks), len(records))
    try:
        for i, task in enumerate(tasks, 1):
            state, cost = AgentState(task), Cost()
            draft = agent_.draft(state, cost)
            if evaluator.check(state, Action(draft)).solved:
                if progress:
                    progress(i, len(tasks))
                continue
            shown = {
                "retrieved": [h.record for h in retriever.retrieve(task, state.render(), draft=draft)],
                "eligible": [
                    r
                    for r in records
                    if r.source_task_id != task.task_id and retriever.parse(r.condition).holds(task)
                ],
                "any": [r for r in records if r.source_task_id != task.task_id],
            }
            entry = _try_records(agent_, evaluator, state, draft, shown, scopes)
            result.failures.append(entry)
            if progress:
                progress(i, len(tasks))
    finally:
        evaluator.close()
    return result
