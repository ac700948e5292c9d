"""The shared decision loop that runs any memory mechanism over tasks.

It is the selector env's loop (`MemorySelectionEnv._step`) with the mechanism in the selector's
place: at each decision the base agent drafts without memory, the mechanism decides the action
(the draft, or the draft revised with its guidance), the evaluator checks it on a fork, Reflexion
reflects after a failure, and the episode ends when the task is solved or its decision /
evaluator-call budget is spent. Costs, the reward of Eq. 10 and the SPEC §8 counters are the env's
(`cm_gym.envs.metrics.EpisodeCounters` over the same info keys), so a mechanism's numbers are
comparable with the env's. Checks a mechanism makes itself (e.g. WM-without-CF's alternatives)
count as evaluator calls and failures but not against the solving budget, as construction's
verification allowance does not.

Harmful use follows SPEC §3 (amended): when memory changed the draft, the memory-free draft is
also checked on a fork — bookkeeping only, never charged — and a use is harmful when the executed
action scores lower than that draft (`uses_worse_than_draft`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cm_gym.agent import Cost, Decision, reuse_label
from cm_gym.core.types import Action, AgentState, Attempt, Task
from cm_gym.envs import DEFAULT_REWARD_WEIGHTS
from cm_gym.envs.metrics import EpisodeCounters
from cm_gym.studies.mechanisms.context import Choice, DecisionContext, MechanismContext

#: Per-episode counters this loop adds to `EpisodeCounters` (the env runner adds the same keys).
EXTRA_KEYS = ("retrieved_records", "memory_tokens", "memory_llm_calls", "verification_calls")


class Mechanism(Protocol):
    """What the loop needs of a memory mechanism (every `base.MemoryMechanism` is one; base calls
    this loop in `MemoryMechanism.run_episodes`, so this module does not import it)."""

    def begin_task(self, task: Task) -> None: ...

    def decide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Choice: ...


@dataclass
class TaskRun:
    """One task run: the final agent state (all attempts) and the episode's counters."""

    state: AgentState
    episode: dict[str, Any]
    cost: Cost = field(default_factory=Cost)


def run_task(
    mechanism: Mechanism | None,
    ctx: MechanismContext,
    task: Task,
    *,
    score_drafts: bool = True,
    max_evaluator_calls: int | None = None,
) -> TaskRun:
    """Run one task with `mechanism` (None = no memory); see the module docstring."""
    agent, weights = ctx.agent, DEFAULT_REWARD_WEIGHTS
    max_calls = int(max_evaluator_calls or ctx.max_decisions)
    state = AgentState(task)
    counters = EpisodeCounters(task_id=task.task_id)
    extra = dict.fromkeys(EXTRA_KEYS, 0)
    total = Cost()
    solving_calls = 0
    if mechanism is not None:
        mechanism.begin_task(task)
    for index in range(ctx.max_decisions):
        cost, memory = Cost(), Cost()
        draft = agent.draft(state, cost)
        d = DecisionContext(
            task, state, draft, index, total.evaluator_calls, total.failures, total.tokens, ctx.max_decisions
        )
        choice = mechanism.decide(ctx, d, memory) if mechanism is not None else None
        action = choice.action if choice is not None else draft
        previous_score = state.last_score if state.attempts else None
        if choice is not None and choice.outcome is not None:
            outcome = choice.outcome
        else:
            outcome = agent.evaluate(state, action, cost)
            solving_calls += 1
        record_id = "+".join(choice.used) if choice is not None and choice.used else None
        new_state = state.with_attempt(
            Attempt(action=action, outcome=outcome, draft=draft, record_id=record_id)
        )
        if not outcome.solved:
            new_state = agent.reflect(new_state, cost)
        changed = record_id is not None and ctx.domain.action_changed(draft, action)
        decision = Decision(new_state, draft, action, outcome, record_id, cost, changed)
        draft_outcome = None
        if score_drafts and decision.changed_by_memory:  # bookkeeping on a fork, never charged
            draft_outcome = ctx.evaluator.check(state.fork(), Action(draft))
        draft_score = float(draft_outcome.score) if draft_outcome is not None else None
        # SPEC §3 amended: against the draft when it was checked, else the paper's rule
        label_rule = "draft" if draft_outcome is not None else "paper"
        cost.add(memory)
        total.add(cost)
        extra["memory_tokens"] += memory.tokens
        extra["memory_llm_calls"] += memory.llm_calls
        extra["verification_calls"] += memory.evaluator_calls
        extra["retrieved_records"] += choice.n_retrieved if choice is not None else 0
        state = new_state
        done = outcome.solved or index + 1 >= ctx.max_decisions or solving_calls >= max_calls
        reward = (
            weights["solve"] * float(done and outcome.solved)
            - weights["calls"] * cost.evaluator_calls
            - weights["failures"] * cost.failures
            - weights["tokens"] * cost.tokens / weights["token_scale"]
        )
        counters.update(
            {
                "task_id": task.task_id,
                "solved": outcome.solved,
                "score": float(outcome.score),
                "evaluator_calls": total.evaluator_calls,
                "failures": total.failures,
                "tokens": total.tokens,
                "retrieval_attempted": bool(choice is not None and choice.retrieval_attempted),
                "retrieved": bool(choice is not None and choice.n_retrieved > 0),
                "record_id": record_id,
                "reuse_label": reuse_label(decision, previous_score, draft_outcome, label_rule),
                "changed_by_memory": decision.changed_by_memory,
                "draft_score": draft_score,
                "outcome_status": outcome.status,
                "budget_kind": str((outcome.details or {}).get("budget_kind", "")),
            },
            reward,
        )
        if done:
            break
    episode = counters.as_dict()
    episode.update(extra)
    return TaskRun(state, episode, total)


def run_episodes(
    mechanism: Mechanism | None,
    ctx: MechanismContext,
    tasks: Sequence[Task],
    *,
    score_drafts: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One episode per task, in order, with the mechanism frozen; the episode dicts of
    `EpisodeCounters` plus `EXTRA_KEYS`."""
    out = []
    for i, task in enumerate(tasks, start=1):
        out.append(run_task(mechanism, ctx, task, score_drafts=score_drafts).episode)
        if progress is not None:
            progress(i, len(tasks))
    return out
