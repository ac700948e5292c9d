"""Verified memory construction: Algorithm 1, lines 3–14 (paper §3.2–3.3, B.1–B.4; SPEC §7).

For each build task the base agent (ReAct / Reflexion) runs up to `max_decisions` decisions. Each
decision drafts without memory; with ``reuse_policy="top1"`` the draft is revised with the top
eligible record (never one from this task), and the executed action's outcome labels that use
(+1 / 0 / −1, `cm_gym.agent.reuse_label`) and updates the record's u (Eq. 6). After a failed
decision (at most `max_expansions` per task) and while the verification allowance lasts, up to K
local alternatives are checked from the same state, Δ = U(o′) − U(o) is computed, candidates that
pass ε_adm are distilled (DISTIL_RECORD), admitted by Eq. 4 and kept under capacity by the
retention rule. Verification calls are counted apart from solving calls. Each record carries the
provenance of its a⁻ and a⁺ (`cm_gym.memory.provenance`); on real drafts only a real a⁻ is
admitted unless `ConstructionConfig.admit_a_minus` says otherwise.

The build is resumable: a source task is marked processed (with its counters) when it finishes, and
a rerun skips processed tasks. Each admission/eviction and each reuse update is its own
transaction, so a killed build leaves every committed record in place.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from cm_gym.agent import BaseAgent, Cost, reuse_label
from cm_gym.core.types import (
    Action,
    AgentState,
    Evaluator,
    Outcome,
    Task,
    check_all,
)
from cm_gym.domains.base import Domain
from cm_gym.domains.conditions import Condition
from cm_gym.domains.environment import environment_versions
from cm_gym.llm.base import LLM
from cm_gym.memory.admission import decide_admission, instance_confirmation
from cm_gym.memory.alternatives import (
    Alternative,
    AlternativeGenerator,
    AlternativesParser,
    RecordedAlternatives,
)
from cm_gym.memory.construction_config import ConstructionConfig
from cm_gym.memory.distill import Distiller, DistilParser, evidence_of
from cm_gym.memory.provenance import a_minus_refusal, provenance_of, unmarked_provenance
from cm_gym.memory.record import Record, evidence_text
from cm_gym.memory.retention import choose_evictions
from cm_gym.memory.retrieval import Retriever, record_view
from cm_gym.memory.store import RecordStore
from cm_gym.memory.summary import BuildSummary, TimedEvaluator, TimedLLM, Timer

logger = logging.getLogger(__name__)

#: the a⁺ feedback of a record stored without a check (``ConstructionConfig(verify=False)``)
UNVERIFIED_FEEDBACK = "not checked by the world model (unverified advice)"

#: ``progress(done, total)`` after every task (processed or skipped)
ProgressFn = Callable[[int, int], None]
#: ``on_verified(task, a⁻, a⁺, Δ)`` for every alternative that improved by more than ε_adm
VerifiedFn = Callable[[Task, str, str, float], None]


class _Builder:
    """One build run over a store (kept small: `build_memory` is the public entry point)."""

    def __init__(
        self,
        domain: Domain,
        store: RecordStore,
        llm: LLM,
        evaluator: Evaluator,
        config: ConstructionConfig,
        agent_kind: str,
        max_decisions: int,
        alternatives_parser: AlternativesParser | None,
        distil_parser: DistilParser | None,
        env_versions: dict[str, frozenset[str]] | None = None,
        recorded: RecordedAlternatives | None = None,
    ) -> None:
        self.domain, self.store, self.cfg = domain, store, config
        self.agent_kind, self.max_decisions = agent_kind, max_decisions
        self.timer = Timer()
        self.llm = TimedLLM(llm, self.timer)
        self.evaluator = TimedEvaluator(evaluator, self.timer)
        self.agent = BaseAgent(self.llm, domain, self.evaluator, kind=agent_kind)
        self.generator = AlternativeGenerator(
            self.llm, domain, config.K, use_llm=config.use_llm_alternatives, parser=alternatives_parser,
            recorded=recorded,
        )  # fmt: skip
        self.distiller = Distiller(self.llm, domain, parser=distil_parser)
        self.retriever = Retriever(
            store,
            domain,
            k=config.k,
            lambda_reuse=config.lambda_reuse,
            use_conditions=config.use_conditions,
            embedder=store.embedder,
            env_versions=env_versions,
        )
        self.summary = BuildSummary()
        self.on_verified: VerifiedFn | None = None
        self.build_tasks: tuple[Task, ...] = ()
        self._vacuous: dict[str, bool] = {}
        self.rng = np.random.default_rng([config.seed, store.next_order()])
        self._unmarked = unmarked_provenance(llm)  # what an unmarked reply is (the simulator's)
        self._verification_spent = int(store.counters.get("verification_calls", 0))

    # -- budget -------------------------------------------------------------------------------
    def _budget_left(self) -> bool:
        budget = self.cfg.verification_budget
        if budget is None or self._verification_spent < budget:
            return True
        self.summary.budget_exhausted = True
        return False

    # -- one task -----------------------------------------------------------------------------
    def run_task(self, task: Task) -> None:
        before = self.summary.counter_values()
        admitted_before = self.summary.admitted
        state, expansions = AgentState(task), 0
        for _ in range(self.max_decisions):
            cost = Cost()
            draft = self.agent.draft(state, cost)
            hit = None
            if self.cfg.reuse_policy == "top1" and len(self.store):
                with self.timer.time("retrieval"):
                    hits = self.retriever.retrieve(task, state.render(), draft=draft)
                hit = hits[0].record if hits else None
            decision = self.agent.decide(state, record=record_view(hit) if hit else None, draft=draft)
            cost.add(decision.cost)
            self.summary.add_solving(cost)
            self.summary.decisions += 1
            if hit is not None:
                draft_outcome = None
                if decision.changed_by_memory and self.cfg.reuse_label_rule == "draft":
                    # bookkeeping for the label: the draft on a fork, never charged to the counters
                    draft_outcome = self.evaluator.check(state.fork(), Action(draft))
                    self.summary.label_checks += 1
                label = reuse_label(
                    decision,
                    state.last_score if state.attempts else None,
                    draft_outcome,
                    self.cfg.reuse_label_rule,
                )
                with self.timer.time("store"):
                    self.store.update_reuse(hit.record_id, label, self.cfg.rho)
                self.summary.reuse_uses += 1
                self.summary.reuse_labels[{1: "helpful", 0: "neutral", -1: "harmful"}[label]] += 1
            if decision.outcome.solved:
                self.summary.solved += 1
                break
            if expansions < self.cfg.max_expansions and self.cfg.K > 0 and self._budget_left():
                expansions += 1
                self.summary.failures_expanded += 1
                marks = (
                    provenance_of(
                        decision.action_mark, revision=decision.changed_by_memory, unmarked=self._unmarked
                    ),
                    provenance_of(decision.draft_mark, revision=False, unmarked=self._unmarked),
                )  # (a⁻, the draft): what admission may refuse
                self._expand(state, decision.action, decision.outcome, marks)
            state = decision.state
        self.summary.tasks += 1
        with self.timer.time("store"):
            self.store.mark_processed(
                task.task_id,
                admitted=self.summary.admitted - admitted_before,
                counters=self.summary.minus(before),
            )

    # -- Module I + II on one failed decision ------------------------------------------------
    def _expand(self, state: AgentState, action: str, outcome: Outcome, marks: tuple[str, str]) -> None:
        cost = Cost()
        try:
            alternatives = self.generator.generate(state, action, outcome, cost, agent_kind=self.agent_kind)
            if not self.cfg.verify:
                if alternatives:
                    claimed = Outcome(score=1.0, solved=True, feedback=UNVERIFIED_FEEDBACK)
                    self._consider(state, action, outcome, alternatives[0], claimed, cost, marks)
                return
            budget = self.cfg.verification_budget
            allowed = len(alternatives) if budget is None else max(0, budget - self._verification_spent)
            cut_by_budget = len(alternatives) > allowed
            alternatives = alternatives[:allowed]
            # independent checks from the same state: an evaluator with check_many runs them in parallel
            outcomes = check_all(self.evaluator, state, [Action(alt.text) for alt in alternatives])
            plus = [alt.text for alt in alternatives]
            self.distiller.prefetch(
                state, action, outcome, plus, outcomes, self.cfg.epsilon_adm, self.agent_kind
            )
            for alt, o2 in zip(alternatives, outcomes, strict=True):
                cost.evaluator_calls += 1
                cost.failures += int(not o2.solved)
                self._verification_spent += 1
                self.summary.alternatives_checked += 1
                if alt.source == "llm":
                    self.summary.alternatives_llm += 1
                elif alt.source == "rule":  # "recorded" ones: checked − llm − rule
                    self.summary.alternatives_rule += 1
                self._consider(state, action, outcome, alt, o2, cost, marks)
            if cut_by_budget:
                self._budget_left()  # records that the verification budget ran out
        finally:
            self.summary.add_verification(cost)

    def _consider(
        self,
        state: AgentState,
        a_minus: str,
        o: Outcome,
        alt: Alternative,
        o2: Outcome,
        cost: Cost,
        marks: tuple[str, str],
    ) -> None:
        a_plus, delta = alt.text, o2.score - o.score
        if not o2.completed or delta <= self.cfg.epsilon_adm:
            self.summary.reject("not_improved")
            return
        task = state.task
        if self.cfg.verify:
            with self.timer.time("evaluator"):
                confirmation = instance_confirmation(self.evaluator.inner, state, a_minus, a_plus)
            if confirmation is not None and not confirmation.get("confirmed", True):
                self.summary.reject("refused_on_instances")
                logger.debug("refused %s from %s on other instances: %s", a_plus, task.task_id, confirmation)
                return
        if self.on_verified is not None:
            self.on_verified(task, a_minus, a_plus, delta)
        refusal = a_minus_refusal(self.cfg.admit_a_minus, *marks)
        if refusal is not None:  # a simulated a⁻ on real drafts: not a real mistake
            self.summary.reject(refusal)
            return
        plus = (
            "edit"
            if alt.source == "rule"
            else "real"  # another published system's output, verbatim
            if alt.source == "recorded"
            else provenance_of(alt.mark, revision=True, unmarked=self._unmarked)
        )
        evidence = evidence_of(o, o2)
        situation, condition = self.distiller.distil(
            state, a_minus, a_plus, evidence_text(evidence), cost, agent_kind=self.agent_kind
        )
        refusal = self._condition_refusal(condition, task)
        if refusal is not None:
            self.summary.reject(refusal)
            logger.debug("refused %s from %s: %s", condition.text, task.task_id, refusal)
            return
        with self.timer.time("admission"):
            record = Record.create(
                domain=self.domain.name,
                source_task_id=task.task_id,
                env_id=task.env_id,
                situation=situation,
                a_minus=a_minus,
                a_plus=a_plus,
                evidence=evidence,
                condition=condition.text,
                contrast_key=self.domain.contrast_key(a_minus, a_plus),
                delta=delta,
                created_order=self.store.next_order(),
                env_version=self.domain.environment_version(task),
                a_minus_provenance=marks[0],
                a_plus_provenance=plus,
                transform=self.domain.transform_of(replace(task, reference=""), a_minus, a_plus),
            )
            embedding = self.store.embedder.embed_one(situation)
            result = decide_admission(
                record,
                embedding,
                self.store,
                inverse_key=self.domain.inverse_contrast_key(a_minus, a_plus),
                completed=o2.completed,
                epsilon=self.cfg.epsilon_adm,
                tau=self.cfg.tau_adm,
                weights=self.cfg.admission_weights,
            )
            if not result.admitted:
                self.summary.reject(result.reason)
                logger.debug("rejected %s from %s: %s", record.contrast_key, task.task_id, result)
                return
            record = replace(record, admission_score=result.score)
            evict = self._evictions(record, embedding)
        with self.timer.time("store"):
            if record.record_id in evict:
                self.store.remove([e for e in evict if e != record.record_id])
                self.summary.evicted += len(evict) - 1
                self.summary.reject("retention")
                return
            self.store.admit(record, embedding, evict=evict)
        self.summary.admitted += 1
        self.summary.evicted += len(evict)
        self.summary.admitted_ids.append(record.record_id)
        logger.info(
            "admitted %s %s (S_adm %.2f) from %s",
            record.record_id,
            record.contrast_key,
            result.score,
            task.task_id,
        )

    def _condition_refusal(self, condition: Condition, source: Task) -> str | None:
        """ "condition_false_on_source", "condition_vacuous" (holds on every T_build task) or None."""
        if self.cfg.refuse_false_on_source and not condition.holds(replace(source, reference="")):
            return "condition_false_on_source"
        if self.cfg.refuse_vacuous and len(self.build_tasks) >= self.cfg.vacuous_min_tasks:
            vacuous = self._vacuous.get(condition.text)
            if vacuous is None:
                vacuous = self._vacuous[condition.text] = all(condition.holds(t) for t in self.build_tasks)
            if vacuous:
                return "condition_vacuous"
        return None

    def _evictions(self, record: Record, embedding: np.ndarray) -> list[str]:
        n_remove = len(self.store) + 1 - self.cfg.capacity
        if n_remove <= 0:
            return []
        pool = list(self.store.records) + [record]
        emb = np.vstack([self.store.embeddings, embedding[None, :]])
        return choose_evictions(
            pool, emb, n_remove, self.cfg.retention, weights=self.cfg.retention_weights, rng=self.rng
        )


def _checkpoint(store: RecordStore, directory: Path, n: int, summary: BuildSummary) -> None:
    path = directory / f"checkpoint-{n:04d}.sqlite"
    store.freeze(path, overwrite=True)
    summary.checkpoints.append(str(path))
    logger.info("checkpoint after %d source tasks: %s (%d records)", n, path, len(store))


def build_memory(
    domain: Domain,
    tasks: Sequence[Task],
    store: RecordStore,
    llm: LLM,
    evaluator: Evaluator,
    config: ConstructionConfig | None = None,
    agent_kind: str = "react",
    max_decisions: int = 3,
    progress: ProgressFn | None = None,
    *,
    checkpoints: Sequence[int] = (),
    checkpoint_dir: str | Path | None = None,
    alternatives_parser: AlternativesParser | None = None,
    distil_parser: DistilParser | None = None,
    before_task: Callable[[Task], None] | None = None,
    on_verified: VerifiedFn | None = None,
    recorded_alternatives: RecordedAlternatives | None = None,
) -> BuildSummary:
    """Build (or resume building) verified memory from `tasks` into `store`.

    `checkpoints` are counts of processed source tasks (cumulative over resumes) after which the
    store is frozen to ``checkpoint_dir/checkpoint-NNNN.sqlite`` (0 = the empty store before the
    first task). Parsers default to `cm_gym.llm.prompts`'s. `before_task(task)` is called before
    each task that is processed (`cm_gym.memory.parallel` waits there for the task's speculation).
    New records carry their environment's content version (`Domain.environment_version`);
    `on_verified` sees every verified improvement before admission (a rebuild's log);
    `recorded_alternatives` adds other published systems' outputs to Module I's candidates.
    """
    cfg = config or ConstructionConfig()
    if store.read_only:
        raise ValueError("build_memory needs a writable RecordStore, not a frozen snapshot")
    wrong = [t.task_id for t in tasks if t.domain != store.domain]
    if wrong or domain.name != store.domain:
        raise ValueError(f"store domain {store.domain!r} != domain {domain.name!r} of tasks {wrong[:5]}")
    if store.capacity != cfg.capacity:
        store.set_meta("capacity", str(cfg.capacity))
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if checkpoints and ckpt_dir is None:
        raise ValueError("checkpoints need a checkpoint_dir")
    wanted = sorted(set(int(c) for c in checkpoints))
    envs = environment_versions(domain, tasks)  # retrieval offers only records verified against these
    builder = _Builder(
        domain,
        store,
        llm,
        evaluator,
        cfg,
        agent_kind,
        max_decisions,
        alternatives_parser,
        distil_parser,
        envs,
        recorded_alternatives,
    )
    builder.build_tasks = tuple(replace(t, reference="") for t in tasks)  # conditions never read it
    builder.on_verified = on_verified
    summary, t0 = builder.summary, time.perf_counter()
    done_count = len(store.processed_task_ids)
    if ckpt_dir is not None and 0 in wanted and done_count == 0:
        _checkpoint(store, ckpt_dir, 0, summary)
    for i, task in enumerate(tasks, start=1):
        if task.task_id in store.processed_task_ids:
            summary.skipped += 1
        else:
            if before_task is not None:
                before_task(task)
            builder.run_task(task)
            done_count += 1
            if ckpt_dir is not None and done_count in wanted:
                with builder.timer.time("store"):
                    _checkpoint(store, ckpt_dir, done_count, summary)
        summary.records = len(store)
        if progress is not None:
            progress(i, len(tasks))
    summary.records = len(store)
    summary.timings = dict(builder.timer.buckets)
    summary.timings["total"] = time.perf_counter() - t0
    missing = [c for c in wanted if c > done_count]
    if missing:
        logger.info("checkpoints %s not reached (%d source tasks processed)", missing, done_count)
    return summary
