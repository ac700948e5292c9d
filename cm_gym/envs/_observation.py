"""The observation side of `MemorySelectionEnv`: at each decision, draft without memory, retrieve,
and build z_t (`cm_gym.envs.features`; the 98-dim paper layout or the 106-dim extended one) and the mask.

Kept apart from `selection.py` so the env module reads as the decision loop (reset, step, reward).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.agent import Cost, RecordView
from cm_gym.core.types import AgentState, Task
from cm_gym.envs import features as F
from cm_gym.memory.record import Record
from cm_gym.memory.retrieval import query_text, record_view

#: first decisions memoised per env (one per task; cleared when full)
_FIRST_MEMO_SIZE = 50_000


@dataclass(frozen=True)
class _FirstDecision:
    """What `_prepare_decision` leaves on a task's fresh state (the memo of `reset`)."""

    draft: str
    cost: Cost
    mark: str
    retrieved: tuple[Any, ...]
    obs: np.ndarray
    mask: np.ndarray


class ObservationMixin:
    """`_prepare_decision` and `_terminal_observation` for the selection env (see the module doc)."""

    _task: Task | None
    _blind_task: Task
    _state: AgentState | None
    _agent: Any
    _retriever: Any
    _draft: str
    _draft_cost: Cost
    _retrieved: list[Any]
    _shown: set[str]
    _mask: np.ndarray
    _obs: np.ndarray
    _decisions: int
    _calls: int
    _failures: int
    _tokens: int
    embedder: Any
    domain: Any
    timings: Any
    retrieval: str
    use_conditions: bool
    k: int
    obs_layout: str
    action_space_name: str
    max_decisions: int
    max_evaluator_calls: int
    token_budget: int

    def _budget(self) -> F.BudgetFeatures:
        assert self._state is not None
        return F.BudgetFeatures(
            decision=self._decisions,
            max_decisions=self.max_decisions,
            evaluator_calls=self._calls,
            max_evaluator_calls=self.max_evaluator_calls,
            failures=self._failures,
            tokens=self._tokens,
            token_budget=self.token_budget,
            last_score=self._state.last_score,
        )

    def _blind(self, task: Task) -> Task:
        """`task` with its reference blanked (what retrieval and the query text see), one copy per
        task object: `reset` asks at every episode, and a Task has a dozen fields to copy."""
        blinds: dict[str, tuple[Task, Task]] = self.__dict__.setdefault("_blinds", {})
        hit = blinds.get(task.task_id)
        if hit is None or hit[0] is not task:  # (a task replaced under the same id: a new copy)
            hit = blinds[task.task_id] = (task, dataclasses.replace(task, reference=""))
        return hit[1]

    def _first_decision_key(self) -> tuple[Any, ...] | None:
        """The memo key of the first decision of the current task, or None when it must be
        prepared afresh: the draft is a pure function of the task only when the agent's LLM says
        its replies are (`SimulatedLLM.pure_replies`; a cached, recorded, real or timed LLM is
        never memoised), and retrieval is a function of (task, state, draft) for a given store
        revision (every mode, `Retriever.retrieve`: the random ones seed per task and state)."""
        if not getattr(self._agent.llm, "pure_replies", False):
            return None
        assert self._task is not None
        store = self._retriever.store
        return (self._task.task_id, store.revision, store.layout_revision)

    def _prepare_first_decision(self) -> None:
        """`reset`'s decision: `_prepare_decision` on the task's fresh state, memoised per task.

        Training resets the same tasks over and over, and a fresh state of a task is always the
        same state (no attempt, zero budget used, nothing shown), so its draft, retrieved records,
        observation and mask are too; a hit replays them, and the agent's draft mark, exactly.
        The env's RNG is never drawn here (`reset` picks the task before), so seeded replay is
        unchanged. Observations and masks are copied both ways: the memo is never shared."""
        key = self._first_decision_key()
        if key is None:
            self._prepare_decision()
            return
        memo: dict[tuple[Any, ...], _FirstDecision] = self.__dict__.setdefault("_first_decisions", {})
        hit = memo.get(key)
        if hit is None:
            self._prepare_decision()
            if len(memo) >= _FIRST_MEMO_SIZE:
                memo.clear()
            memo[key] = _FirstDecision(
                self._draft,
                self._draft_cost.copy(),
                self._agent.draft_mark(self._draft),
                tuple(self._retrieved),
                self._obs.copy(),
                self._mask.copy(),
            )
            return
        self._draft, self._draft_cost = hit.draft, hit.cost.copy()
        self._agent.restore_draft(hit.draft, hit.mark)
        self._retrieved = list(hit.retrieved)
        self._obs, self._mask = hit.obs.copy(), hit.mask.copy()

    def _prepare_decision(self) -> None:
        """Draft without memory, retrieve, and build the observation the policy will see."""
        assert self._state is not None and self._task is not None
        clock, timings = time.perf_counter, self.timings
        self._draft_cost = Cost()
        self._draft = self._agent.draft(self._state, self._draft_cost)
        t0 = clock()
        state_text = self._state.render()
        state_query = query_text(self._task, state_text)
        retrieving = not (self.retrieval == "none" or self.k == 0)
        self.embedder.prefetch(
            [state_query, self._draft]
            + ([self._retriever.embedded_text(self._task, state_text, self._draft)] if retrieving else [])
        )
        state_embedding = self.embedder.embed_one(state_query)
        draft_embedding = self.embedder.embed_one(self._draft)
        t1 = clock()
        if not retrieving:
            self._retrieved = []
        else:
            hits = self._retriever.retrieve(self._task, state_text, draft=self._draft)
            self._retrieved = list(hits)[: self.k]
        t2 = clock()
        slots = [F.SlotFeatures.from_record(r.record, r.relevance) for r in self._retrieved]
        extras = self._slot_extras() if self.obs_layout == "extended" else None
        self._obs = F.build_observation(
            state_embedding, draft_embedding, slots, self._budget(), extras, self.obs_layout
        )
        self._mask = F.mask_for(len(slots), self.action_space_name)
        t3 = clock()
        timings.add("features", (t1 - t0) + (t3 - t2))
        timings.add("retrieval", t2 - t1)

    def _record_view(self, record: Record) -> RecordView:
        """What the agent sees of `record` (`record_view`), memoised per record object: a record
        of the frozen store is immutable (a frozen dataclass), and rendering it is a template
        fill per decision. The memo keeps the record, so its id is never reused while cached."""
        memo: dict[tuple[int, bool], tuple[Record, RecordView]] = self.__dict__.setdefault(
            "_record_views", {}
        )
        key = (id(record), self.use_conditions)
        hit = memo.get(key)
        if hit is not None and hit[0] is record:
            return hit[1]
        view = record_view(record, show_condition=self.use_conditions)
        if len(memo) >= _FIRST_MEMO_SIZE:
            memo.clear()
        memo[key] = (record, view)
        return view

    def _slot_extras(self) -> list[F.SlotExtras]:
        """The extended layout's per-slot features: does the record's edit have a site in the
        draft (`Domain.record_applies`, reference-free, no LLM call), was it shown before."""
        assert self._task is not None
        blind = self._blind_task
        return [
            F.SlotExtras(
                self.domain.record_applies(blind, self._draft, r.record.a_minus, r.record.a_plus),
                r.record.record_id in self._shown,
            )
            for r in self._retrieved
        ]

    def decision_context(self, vectors: bool = False) -> dict[str, Any]:
        """What a deployed selector may know at the current decision besides z_t (issue 34): the
        task id, the retrieval query (task prompt and state, never the reference) and the draft,
        and per retrieved slot, in slot order, the record's identity and content (`record_ids`,
        `records`: id, situation q, a⁻, a⁺, condition, source task, the record it `replaces`).
        With `vectors`, also ``record_vectors``: P·E(situation) per slot (32 dims, the projection
        of `cm_gym.envs.features`). Policies that key values on record identity (MemRL) or score
        (task, record) pairs (Memento's classifier) read it; nothing is charged or changed."""
        assert self._state is not None and self._task is not None
        records = [r.record for r in self._retrieved]
        out: dict[str, Any] = {
            "task_id": self._task.task_id,
            "query": query_text(self._blind_task, self._state.render()),
            "draft": self._draft,
            "record_ids": [r.record_id for r in records],
            "records": [
                {
                    "record_id": r.record_id,
                    "situation": r.situation,
                    "a_minus": r.a_minus,
                    "a_plus": r.a_plus,
                    "condition": r.condition,
                    "source_task_id": r.source_task_id,
                    "replaces": getattr(r, "replaces", ""),
                }
                for r in records
            ],
        }
        if vectors:
            out["record_vectors"] = [F.project(self.embedder.embed_one(r.situation)) for r in records]
        return out

    def _terminal_observation(self) -> None:
        assert self._state is not None
        self._retrieved, self._draft = [], ""
        assert self._task is not None
        state = self.embedder.embed_one(query_text(self._task, self._state.render()))
        self._obs = F.build_observation(state, None, [], self._budget(), [], self.obs_layout)
        self._mask = F.mask_for(0, self.action_space_name)
