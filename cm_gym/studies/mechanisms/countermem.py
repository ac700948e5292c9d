"""CounterMem itself behind the `MemoryMechanism` interface: a frozen verified-record store plus a
memory-use policy (the trained masked DQN, or a fixed rule).

`build` runs Algorithm 1 (`cm_gym.memory.construction.build_memory`) on the build tasks and freezes
the store; `guide` retrieves at most k eligible records (conditions enforced, the task's own
records excluded), builds the selector's observation z_t exactly as `MemorySelectionEnv` does and
shows the LLM the record the policy picks (or nothing); `decide` revises through
REVISE_WITH_RECORD. `run_episodes` runs the reference implementation — the selector env itself —
so the numbers reported for CF Memory come from the same env the selector was trained in; a test
checks that the mechanism's own `guide` loop gives the same episodes. The policy is frozen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.agent import Cost
from cm_gym.core.types import Task
from cm_gym.envs import features as F
from cm_gym.envs.metrics import EpisodeCounters
from cm_gym.llm.base import LLM, REVISE_WITH_RECORD, REVISE_WITH_RECORDS, Completion
from cm_gym.memory.retrieval import Retriever, query_text, record_view
from cm_gym.studies.mechanisms.base import (
    Choice,
    DecisionContext,
    Guidance,
    GuidanceItem,
    MechanismContext,
    MechanismError,
    MemoryMechanism,
    ProgressFn,
)
from cm_gym.studies.mechanisms.episode import EXTRA_KEYS

#: Fixed memory-use rules accepted as `policy` besides a trained checkpoint ("top2": the pair
#: action space only).
RULES = ("skip", "top1", "top2", "random")


class TallyLLM:
    """Counts tokens and calls per template of the LLM it wraps (e.g. to separate memory-use
    tokens from solving tokens inside an env)."""

    def __init__(self, inner: LLM) -> None:
        self.inner, self.name = inner, getattr(inner, "name", "llm")
        self.tokens: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        completion = self.inner.complete(template, fields)
        self.tokens[template] = self.tokens.get(template, 0) + completion.total_tokens
        self.calls[template] = self.calls.get(template, 0) + 1
        return completion

    def reset(self) -> None:
        self.tokens.clear()
        self.calls.clear()

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)


def load_policy(policy: str, seed: int = 0, action_space: str = "single") -> Any:
    """A memory-use policy: "skip", "top1", "top2" (pairs), "random" or a masked-DQN checkpoint
    path; the rules act in `action_space` ("single" or the opt-in "pairs")."""
    from cm_gym.agents.baselines import AlwaysSkip, RandomValid, TopOne, TopTwo

    if policy == "skip":
        return AlwaysSkip(action_space=action_space)
    if policy == "top1":
        return TopOne(action_space=action_space)
    if policy == "top2":
        return TopTwo(action_space=action_space)
    if policy == "random":
        return RandomValid(seed=seed, action_space=action_space)
    if not Path(policy).is_file():
        raise MechanismError(f"policy {policy!r} is neither one of {RULES} nor a selector checkpoint file")
    from cm_gym.agents.masked_dqn import MaskedDQN

    return MaskedDQN.load(policy, env=None, device="cpu")


class CounterMem(MemoryMechanism):
    """Verified counterfactual records (q, a⁻, a⁺, e, c, u) and a selector that picks one or none."""

    name = "countermem"
    label = "CF Memory"
    source = "CounterMem (this paper): Modules I-III, Algorithm 1"
    adapted = "the reference implementation: construction, frozen store, masked-DQN selector."

    def __init__(
        self,
        snapshot: str | Path | None = None,
        policy: str = "top1",
        *,
        benchmark: str | None = None,
        retrieval: str = "matched",
        use_conditions: bool = True,
        k: int = 3,
        seed: int = 0,
        construction: Any = None,
        workdir: str | Path | None = None,
        action_space: str = "single",
        check_env_versions: bool = True,
        log_uses: bool = False,
    ) -> None:
        super().__init__()
        self.action_space, self.check_env_versions = action_space, bool(check_env_versions)
        self.log_uses = bool(log_uses)  # episodes gain "use_log": [record id, score, draft score] per use
        self.snapshot_path = Path(snapshot) if snapshot is not None else None
        self.policy_spec, self.benchmark, self.retrieval = policy, benchmark, retrieval
        self.use_conditions, self.k, self.seed = use_conditions, int(k), int(seed)
        self.construction, self.workdir = construction, Path(workdir) if workdir is not None else None
        self._snapshot: Any = None
        self._policy: Any = None
        self._retriever: Retriever | None = None
        self._selected: Any = None

    # -- construction -----------------------------------------------------------------------
    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        """Algorithm 1 on `tasks` into ``workdir/store.sqlite``, frozen to ``workdir/snapshot.sqlite``."""
        from cm_gym.memory.construction import build_memory
        from cm_gym.memory.store import RecordStore

        if self.workdir is None:
            raise MechanismError("CounterMem.build needs a workdir for its store")
        self.workdir.mkdir(parents=True, exist_ok=True)
        snapshot = self.workdir / "snapshot.sqlite"
        with RecordStore(
            self.workdir / "store.sqlite", domain=ctx.domain.name, benchmark=self.benchmark
        ) as store:
            summary = build_memory(
                ctx.domain,
                tasks,
                store,
                ctx.llm,
                ctx.evaluator,
                self.construction,
                agent_kind=ctx.agent_kind,
                max_decisions=ctx.max_decisions,
                progress=progress,
            )
            store.freeze(snapshot, overwrite=True)
        self.build_cost = Cost(
            evaluator_calls=summary.solving_calls + summary.verification_calls,
            prompt_tokens=summary.solving_tokens + summary.verification_tokens,
            llm_calls=summary.solving_llm_calls + summary.verification_llm_calls,
        )
        self.build_info = {"tasks": summary.tasks, "records": summary.records}
        self.snapshot_path, self._snapshot, self._retriever = snapshot, None, None

    # -- frozen parts -----------------------------------------------------------------------
    @property
    def snapshot(self) -> Any:
        if self._snapshot is None:
            if self.snapshot_path is None:
                raise MechanismError("CounterMem has no store: build it or pass a frozen snapshot")
            from cm_gym.memory.snapshot import FrozenStore

            self._snapshot = FrozenStore.open(self.snapshot_path)
        return self._snapshot

    @property
    def policy(self) -> Any:
        if self._policy is None:
            self._policy = load_policy(self.policy_spec, self.seed, self.action_space)
        return self._policy

    def retriever(self, ctx: MechanismContext) -> Retriever:
        if self._retriever is None:
            self._retriever = Retriever(
                self.snapshot,
                ctx.domain,
                k=self.k,
                use_conditions=self.use_conditions,
                mode=self.retrieval,
                seed=self.seed,
                embedder=ctx.embedder,
            )
        return self._retriever

    # -- one decision (the env's `_prepare_decision` + `_step`, for custom loops) ---------------
    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        state_text = d.state.render()
        state_embedding = ctx.embedder.embed_one(query_text(d.task, state_text))
        retrieved = (  # ranked on the question and the draft (`Domain.retrieval_text`), as the env
            []
            if self.retrieval == "none" or self.k == 0
            else self.retriever(ctx).retrieve(d.task, state_text, draft=d.draft)[: self.k]
        )
        budget = F.BudgetFeatures(
            decision=d.decision,
            max_decisions=d.max_decisions,
            evaluator_calls=d.evaluator_calls,
            max_evaluator_calls=d.max_decisions,
            failures=d.failures,
            tokens=d.tokens,
            token_budget=20_000,
            last_score=d.state.last_score,
        )
        slots = [F.SlotFeatures.from_record(r.record, r.relevance) for r in retrieved]
        obs = F.build_observation(state_embedding, ctx.embedder.embed_one(d.draft), slots, budget)
        action, _ = self.policy.predict(obs, deterministic=True)
        a = int(np.asarray(action).reshape(-1)[0])
        self._selected = retrieved[a - 1].record if 0 < a <= len(retrieved) else None
        if self._selected is None:
            return Guidance((), len(retrieved))
        view = record_view(self._selected, show_condition=self.use_conditions)
        return Guidance(
            (GuidanceItem(view.record_id, view.rendered, self._selected.source_task_id),), len(retrieved)
        )

    def decide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Choice:
        guidance = self.guide(ctx, d, cost)
        attempted = self.retrieval != "none" and self.k > 0
        retrieved = guidance.retrieved if guidance is not None else 0
        if self._selected is None:
            return Choice(d.draft, retrieval_attempted=attempted, n_retrieved=retrieved)
        view = record_view(self._selected, show_condition=self.use_conditions)
        action = ctx.agent.revise(d.state, d.draft, view, cost)
        return Choice(action, (self._selected.record_id,), attempted, retrieved)

    # -- the reference path: the selector env -----------------------------------------------
    def run_episodes(
        self,
        ctx: MechanismContext,
        tasks: Sequence[Task],
        *,
        score_drafts: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[dict[str, Any]]:
        """One episode per task in `MemorySelectionEnv` with this store and policy; the same
        episode dicts as `episode.run_episodes`."""
        from cm_gym.envs.selection import MemorySelectionEnv

        tally = TallyLLM(ctx.llm)
        env = MemorySelectionEnv(
            benchmark=self.benchmark or self.snapshot.benchmark,
            store=self.snapshot,
            tasks=list(tasks),
            llm=tally,
            agent=ctx.agent_kind,
            max_decisions=ctx.max_decisions,
            k=self.k,
            use_conditions=self.use_conditions,
            retrieval=self.retrieval,
            retrieval_seed=self.seed,
            score_drafts=score_drafts,
            task_order="sequential",
            action_space=self.action_space,
            check_env_versions=self.check_env_versions,
        )
        out: list[dict[str, Any]] = []
        try:
            for i, task in enumerate(tasks):
                obs, info = env.reset(seed=i, options={"task_id": task.task_id})
                counters, extra = EpisodeCounters(task_id=task.task_id), dict.fromkeys(EXTRA_KEYS, 0)
                pairs = self.action_space == "pairs"
                if pairs:  # decisions that showed two records (the opt-in pair action space)
                    extra["pair_uses"] = 0
                if self.log_uses:
                    extra["use_log"] = []
                tally.reset()
                done = False
                while not done:
                    action, _ = self.policy.predict(obs, deterministic=True)
                    obs, reward, terminated, truncated, info = env.step(
                        int(np.asarray(action).reshape(-1)[0])
                    )
                    counters.update(info, float(reward))
                    extra["retrieved_records"] += int(info.get("n_retrieved", 0))
                    if pairs:
                        extra["pair_uses"] += int(bool(info.get("pair_use", False)))
                    if self.log_uses and info.get("record_id") is not None:
                        extra["use_log"].append([info["record_id"], info["score"], info.get("draft_score")])
                    done = terminated or truncated
                extra["memory_tokens"] = sum(
                    tally.tokens.get(t, 0) for t in (REVISE_WITH_RECORD, REVISE_WITH_RECORDS)
                )
                extra["memory_llm_calls"] = sum(
                    tally.calls.get(t, 0) for t in (REVISE_WITH_RECORD, REVISE_WITH_RECORDS)
                )
                out.append({**counters.as_dict(), **extra})
                if progress is not None:
                    progress(i + 1, len(tasks))
        finally:
            env.close()
        return out
