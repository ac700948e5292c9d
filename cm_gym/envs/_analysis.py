"""Analysis-only methods of `MemorySelectionEnv`: options checked on forks, never charged.

The Oracle baseline (`peek`), `cm-gym diagnose` (`counterfactuals`) and `cm-gym calibrate`
(`check_text`) read what an option *would* do at the current decision. Nothing here changes the
episode, its counters, the observation or the store; no deployable selector may call them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.agent import Cost
from cm_gym.core.types import Action, CmGymError, Outcome
from cm_gym.envs import features as F
from cm_gym.envs._actions import action_index
from cm_gym.envs._reward import decision_reward
from cm_gym.memory.retrieval import record_view


@dataclass(frozen=True)
class Counterfactual:
    """One option at a decision, checked on a fork: the action index, the record it shows (None
    for skip), the text it would execute (the draft for skip, the revision for a slot) and the
    world model's outcome."""

    action: int
    record_id: str | None
    text: str
    outcome: Outcome


class AnalysisMixin:
    """`peek`, `counterfactuals` and `check_text` for the selection env (see the module doc)."""

    _done: bool
    _state: Any
    _mask: np.ndarray
    _draft: str
    _retrieved: list[Any]
    _agent: Any
    evaluator: Any
    use_conditions: bool
    action_space_name: str
    n_actions: int
    _decisions: int
    _calls: int
    _draft_cost: Any
    _cf_cache: dict[tuple[Any, ...], tuple[Any, Any]]
    max_decisions: int
    max_evaluator_calls: int
    reward_weights: Any

    def peek(self, action: int) -> Outcome:
        """ANALYSIS ONLY (the Oracle baseline): what `action` would score at the current decision,
        evaluated on a fork. Counters, state, observation and store are untouched; with the
        simulated LLM the answer is what `step(action)` would get. A masked action peeks skip."""
        return self._counterfactual(action_index(action, self.n_actions)).outcome

    def check_text(self, text: str) -> Outcome:
        """ANALYSIS ONLY (`cm-gym calibrate`): the world model's outcome for any action text at
        the current decision, on a fork; nothing is charged or changed."""
        if self._done or self._state is None:
            raise CmGymError("check_text() needs an episode in progress: call reset() first")
        return self.evaluator.check(self._state.fork(), Action(text))

    def counterfactuals(self) -> list[Counterfactual]:
        """ANALYSIS ONLY (`cm-gym diagnose`): every valid action's executed text and outcome at the
        current decision, each on a fork, skip first. Nothing is charged or changed."""
        return [self._counterfactual(int(a)) for a in np.flatnonzero(self._mask)]

    def counterfactual_table(self) -> dict[int, dict[str, Any]]:
        """ANALYSIS ONLY (``counterfactuals=True`` puts it in each step's info): for skip and every
        valid action at the current decision, what ``step(action)`` would return — the verified
        outcome, the reward and whether the episode would end — each decided by the agent (the
        same draft, the record's revision, the check, Reflexion's reflection) on a fork of the
        current state and paid by the env's own reward formula. Decisions are cached per (task,
        state, draft, records), so a revisited decision costs nothing; nothing is charged or
        changed. Keys are action indices; each value: ``record_id``, ``solved``, ``score``,
        ``status``, ``reward``, ``terminated``."""
        if self._done or self._state is None:
            raise CmGymError("counterfactual_table() needs an episode in progress: call reset() first")
        out: dict[int, dict[str, Any]] = {}
        for a in (int(x) for x in np.flatnonzero(self._mask)):
            records = [self._retrieved[j - 1].record for j in F.action_slots(a, self.action_space_name)]
            key = (self._state.task.task_id, self._state.render(), len(self._state.attempts), self._draft,
                   tuple(r.record_id for r in records))  # fmt: skip
            if key not in self._cf_cache:
                views = [record_view(r, show_condition=self.use_conditions) for r in records]
                state = self._state.fork()
                if len(views) == 2:
                    decision = self._agent.decide_with_records(state, views, draft=self._draft)
                else:
                    decision = self._agent.decide(state, views[0] if views else None, draft=self._draft)
                self._cf_cache[key] = (decision.outcome, decision.cost)
            outcome, decision_cost = self._cf_cache[key]
            cost = Cost()
            cost.add(self._draft_cost)
            cost.add(decision_cost)
            exhausted = (
                self._decisions + 1 >= self.max_decisions
                or self._calls + cost.evaluator_calls >= self.max_evaluator_calls
            )
            reward, terminated = decision_reward(self.reward_weights, cost, outcome.solved, exhausted)
            out[a] = {
                "record_id": "+".join(r.record_id for r in records) or None,
                "solved": bool(outcome.solved),
                "score": float(outcome.score),
                "status": str(outcome.status),
                "reward": reward,
                "terminated": terminated,
            }
        return out

    def _counterfactual(self, action: int) -> Counterfactual:
        if self._done or self._state is None:
            raise CmGymError("peek() needs an episode in progress: call reset() first")
        a = action if 0 <= action < self.n_actions and self._mask[action] else 0
        records = [self._retrieved[j - 1].record for j in F.action_slots(a, self.action_space_name)]
        views = [record_view(r, show_condition=self.use_conditions) for r in records]
        text, record_id = self._draft, None
        if len(views) == 1:
            text, record_id = (
                self._agent.revise(self._state, self._draft, views[0], Cost()),
                records[0].record_id,
            )
        elif len(views) == 2:  # the pair action space
            text = self._agent.revise_with_records(self._state, self._draft, views, Cost())
            record_id = "+".join(r.record_id for r in records)
        return Counterfactual(a, record_id, text, self.evaluator.check(self._state.fork(), Action(text)))
