"""The base agent loop (ReAct or Reflexion): draft → (revise with one record) → evaluate → feedback.

Shared by memory construction and the selector env, so both see exactly the same LLM calls and the
same cost accounting. The agent never looks inside a record store: a record reaches it as the
plain fields of `RecordView`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cm_gym.core.types import TRUNCATION, Action, AgentState, Attempt, Evaluator, Outcome, truncate
from cm_gym.domains.base import Domain
from cm_gym.llm.base import DRAFT_ACTION, LLM, REFLECT, REVISE_WITH_RECORD, REVISE_WITH_RECORDS, Completion

logger = logging.getLogger(__name__)

AGENT_KINDS = ("react", "reflexion")


#: How a shown record revises the draft: "llm" (default: REVISE_WITH_RECORD, the LLM reads the
#: record) or "transform" (the record's executable transform, `Domain.apply_transform`, no LLM).
REVISE_MODES = ("llm", "transform")
#: The provenance mark of an action made by a record's transform (`Decision.action_mark`).
TRANSFORM_MARK = "transform"


@dataclass(frozen=True)
class RecordView:
    """What the LLM may see of one record: its rendered text and its contrast; `transform` is
    the record's executable transform ("" when it has none), used only by ``revise="transform"``."""

    record_id: str
    rendered: str
    a_minus: str
    a_plus: str
    transform: str = ""


@dataclass
class Cost:
    """Counters charged to one decision (SPEC §3 reward, §8 metrics)."""

    evaluator_calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    llm_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def charge(self, completion: Completion) -> None:
        self.llm_calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        if completion.cached:
            self.cached_tokens += completion.total_tokens

    def add(self, other: Cost) -> None:
        """Add `other`'s counters to these, field by field (`step` does twice per decision)."""
        self.evaluator_calls += other.evaluator_calls
        self.failures += other.failures
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.llm_calls += other.llm_calls

    def copy(self) -> Cost:
        """An independent copy (``dataclasses.replace(self)`` without its field introspection)."""
        return Cost(self.evaluator_calls, self.failures, self.prompt_tokens, self.completion_tokens,
                    self.cached_tokens, self.llm_calls)  # fmt: skip


@dataclass(frozen=True)
class Decision:
    """The result of one decision: the memory-free draft, the executed action and its outcome.
    `changed` is the domain's verdict on draft vs action (`Domain.action_changed`: parsed,
    normalised actions; two unusable replies are no change); None falls back to the text.
    `draft_mark` / `action_mark` are the provenance marks (`Completion.provenance`: "real:<system>",
    "simulated", "" when the backend does not say) of the replies the draft and the executed
    action came from: the revision's when a record changed the action, else the draft's."""

    state: AgentState
    draft: str
    action: str
    outcome: Outcome
    record_id: str | None
    cost: Cost
    changed: bool | None = None
    draft_mark: str = ""
    action_mark: str = ""

    @property
    def changed_by_memory(self) -> bool:
        """A record was shown and the executed action is another action than the draft."""
        if self.record_id is None:
            return False
        if self.changed is not None:
            return self.changed
        return self.action.strip() != self.draft.strip()


class BaseAgent:
    """A frozen LLM driven as ReAct (act, read feedback, act again) or Reflexion (also writes a
    reflection after each failure and keeps it in the state for later attempts).

    `revise` chooses how a shown record revises the draft (`REVISE_MODES`): "llm" (default) asks
    the LLM (REVISE_WITH_RECORD); "transform" applies the record's stored transform
    (`Domain.apply_transform`) with no LLM call and marks the action "transform". When a record
    has no transform or its transform has no site in the draft, "transform" keeps the draft
    unchanged (never falls back to the LLM: a transform revision costs no tokens, and the
    decision shows that the record changed nothing)."""

    def __init__(
        self, llm: LLM, domain: Domain, evaluator: Evaluator, kind: str = "react", revise: str = "llm"
    ) -> None:
        if kind not in AGENT_KINDS:
            raise ValueError(f"agent kind must be one of {AGENT_KINDS}, got {kind!r}")
        if revise not in REVISE_MODES:
            raise ValueError(f"revise must be one of {REVISE_MODES}, got {revise!r}")
        self.llm, self.domain, self.evaluator, self.kind = llm, domain, evaluator, kind
        self.revise_mode = revise
        self._draft_mark: tuple[str, str] = ("", "")  # (last parsed draft, its reply's provenance)
        self._revision_mark = ""  # the provenance of the last revision's reply

    # -- LLM calls --------------------------------------------------------------------------
    def _fields(self, state: AgentState, **extra: Any) -> dict[str, Any]:
        task = state.task
        fields: dict[str, Any] = {
            "task": task,
            "state": state,
            "agent": self.kind,
            "question": task.prompt,
            "context": truncate(task.context, TRUNCATION["context"]),
            "state_text": state.render(),
            "action_kind": self.domain.action_kind,
            "action_format": self.domain.action_format,
            "decision": state.decision,
        }
        fields.update(extra)
        return fields

    def draft(self, state: AgentState, cost: Cost) -> str:
        """DRAFT_ACTION: the memory-free draft â_t."""
        completion = self.llm.complete(DRAFT_ACTION, self._fields(state))
        cost.charge(completion)
        action = self.domain.parse_action(completion.text)
        self._draft_mark = (action, completion.provenance or "")
        return action

    def draft_mark(self, draft: str) -> str:
        """The provenance mark of the reply `draft` came from, when it is this agent's last draft
        ("" otherwise, or when the backend does not say)."""
        return self._draft_mark[1] if self._draft_mark[0] == draft else ""

    def restore_draft(self, draft: str, mark: str) -> None:
        """Make `draft` this agent's last draft with the provenance `mark`, as `draft` does when
        it parses one: a caller that replays a memoised draft of a pure LLM (`LLM` with
        ``pure_replies``) skips the call but leaves the agent as the call would have."""
        self._draft_mark = (draft, mark)

    def marks(self) -> tuple[tuple[str, str], str]:
        """The provenance marks this agent keeps between calls (its last draft with its reply's
        mark, and its last revision's mark): what a caller replaying a memoised decision of a pure
        LLM saves (`restore_marks`) so that the agent ends as the calls would have left it."""
        return self._draft_mark, self._revision_mark

    def restore_marks(self, marks: tuple[tuple[str, str], str]) -> None:
        """Set the marks `marks` saved."""
        self._draft_mark, self._revision_mark = marks

    def apply_transform(self, state: AgentState, draft: str, record: RecordView) -> str:
        """``revise="transform"``: the record's transform applied to the draft (reference blanked),
        or the draft unchanged when the record has none or it does not fit. No LLM call."""
        self._revision_mark = TRANSFORM_MARK
        if not record.transform:
            return draft
        task = dataclasses.replace(state.task, reference="")
        revised = self.domain.apply_transform(task, draft, record.transform)
        return revised if revised else draft

    def revise(self, state: AgentState, draft: str, record: RecordView, cost: Cost) -> str:
        """REVISE_WITH_RECORD with exactly one record; the LLM may return the draft unchanged.
        With ``revise="transform"`` the record's transform instead (`apply_transform`)."""
        if self.revise_mode == "transform":
            return self.apply_transform(state, draft, record)
        fields = self._fields(
            state,
            draft=truncate(draft, TRUNCATION["draft"]),
            record=truncate(record.rendered, TRUNCATION["record"]),
            record_id=record.record_id,
            record_a_minus=record.a_minus,
            record_a_plus=record.a_plus,
        )
        completion = self.llm.complete(REVISE_WITH_RECORD, fields)
        cost.charge(completion)
        self._revision_mark = completion.provenance or ""
        revised = self.domain.parse_action(completion.text)
        return revised or draft

    def revise_with_records(
        self, state: AgentState, draft: str, records: Sequence[RecordView], cost: Cost
    ) -> str:
        """REVISE_WITH_RECORDS with exactly two records, in the order given (beyond the paper:
        the opt-in pair action space); the LLM may return the draft unchanged."""
        if len(records) != 2:
            raise ValueError(f"REVISE_WITH_RECORDS shows exactly two records, got {len(records)}")
        if self.revise_mode == "transform":  # each transform in turn, where it fits
            for record in records:
                draft = self.apply_transform(state, draft, record)
            return draft
        extra: dict[str, Any] = {
            "draft": truncate(draft, TRUNCATION["draft"]),
            "record_id": "+".join(r.record_id for r in records),
        }
        for i, record in enumerate(records, start=1):
            extra[f"record_{i}"] = truncate(record.rendered, TRUNCATION["record"])
            extra[f"record_{i}_a_minus"] = record.a_minus
            extra[f"record_{i}_a_plus"] = record.a_plus
        completion = self.llm.complete(REVISE_WITH_RECORDS, self._fields(state, **extra))
        cost.charge(completion)
        self._revision_mark = completion.provenance or ""
        revised = self.domain.parse_action(completion.text)
        return revised or draft

    def reflect(self, state: AgentState, cost: Cost) -> AgentState:
        """Reflexion only: write one reflection on the last failed attempt into the state."""
        if self.kind != "reflexion" or not state.attempts or state.solved:
            return state
        last = state.attempts[-1]
        fields = self._fields(
            state,
            last_action=truncate(last.action, TRUNCATION["action"]),
            feedback=truncate(last.outcome.feedback, TRUNCATION["feedback"]),
        )
        completion = self.llm.complete(REFLECT, fields)
        cost.charge(completion)
        text = completion.text.strip()
        return state.with_reflection(truncate(text, 400)) if text else state

    # -- world model ------------------------------------------------------------------------
    def evaluate(self, state: AgentState, action: str, cost: Cost) -> Outcome:
        """One world-model call on a fork of `state` (counted as an evaluator call; a failure unless
        it solved, or its hang guard stopped it: status "infrastructure" is not the action's). When
        the reply held no usable action (`Domain.parse_problem`), the feedback says so first."""
        outcome = unusable_feedback(self.domain, action, self.evaluator.check(state.fork(), Action(action)))
        cost.evaluator_calls += 1
        if not outcome.solved and outcome.status != "infrastructure":
            cost.failures += 1
        return outcome

    # -- one decision -----------------------------------------------------------------------
    def decide(
        self, state: AgentState, record: RecordView | None = None, draft: str | None = None
    ) -> Decision:
        """Draft (unless given), optionally revise with one record, evaluate, record feedback."""
        cost = Cost()
        if draft is None:
            draft = self.draft(state, cost)
        action = self.revise(state, draft, record, cost) if record is not None else draft
        outcome = self.evaluate(state, action, cost)
        attempt = Attempt(
            action=action, outcome=outcome, draft=draft, record_id=record.record_id if record else None
        )
        new_state = state.with_attempt(attempt)
        if not outcome.solved:
            new_state = self.reflect(new_state, cost)
        changed = record is not None and self.domain.action_changed(draft, action)
        mark = self.draft_mark(draft)
        return Decision(
            new_state, draft, action, outcome, attempt.record_id, cost, changed,
            mark, self._revision_mark if changed else mark,
        )  # fmt: skip

    def decide_with_records(
        self, state: AgentState, records: Sequence[RecordView], draft: str | None = None
    ) -> Decision:
        """`decide` with zero, one or two records (two: REVISE_WITH_RECORDS); the decision's
        `record_id` joins the ids of two records with "+"."""
        if len(records) < 2:
            return self.decide(state, records[0] if records else None, draft)
        cost = Cost()
        if draft is None:
            draft = self.draft(state, cost)
        action = self.revise_with_records(state, draft, records, cost)
        outcome = self.evaluate(state, action, cost)
        record_id = "+".join(r.record_id for r in records)
        new_state = state.with_attempt(
            Attempt(action=action, outcome=outcome, draft=draft, record_id=record_id)
        )
        if not outcome.solved:
            new_state = self.reflect(new_state, cost)
        changed = self.domain.action_changed(draft, action)
        mark = self.draft_mark(draft)
        return Decision(
            new_state, draft, action, outcome, record_id, cost, changed,
            mark, self._revision_mark if changed else mark,
        )  # fmt: skip


def unusable_feedback(domain: Domain, action: str, outcome: Outcome) -> Outcome:
    """`outcome` with its feedback led by why the reply held no usable action (a parse failure
    becomes evaluator feedback the model can act on); unchanged for a usable action."""
    if outcome.solved:
        return outcome
    problem = domain.parse_problem(action)
    if problem is None:
        return outcome
    feedback = f"No usable {domain.reply_format.what}: {problem}." + (
        f" {outcome.feedback}" if outcome.feedback else ""
    )
    return dataclasses.replace(outcome, feedback=feedback)


#: The reuse-label rules: "draft" (SPEC §3 *Amended*, the default) and "paper" (Appendix B.3).
REUSE_LABEL_RULES = ("draft", "paper")


def _key(outcome: Outcome) -> tuple[float, float]:
    return (float(outcome.solved), float(outcome.score))


def reuse_label(
    decision: Decision,
    previous_score: float | None,
    draft_outcome: Outcome | None = None,
    rule: str = "draft",
) -> int:
    """The reuse label y ∈ {−1, 0, +1} of one record use (Eq. 6).

    Unchanged action → 0 under both rules. Otherwise:

    * ``rule="draft"`` (SPEC §3 *Amended*, default): compare the executed (revised) action with
      the memory-free draft checked on a fork of the same state (`draft_outcome`, bookkeeping that
      is never charged): better → +1, equal → 0, worse → −1 (solved first, then score). Harm is
      visible and u can go negative.
    * ``rule="paper"`` (Appendix B.3): solved → +1; otherwise the sign of the utility change
      against the previous evaluated attempt, or 0 if there is none. With 0/1 utilities the
      previous attempt failed, so this rule can almost never give −1.
    """
    if rule not in REUSE_LABEL_RULES:
        raise ValueError(f"reuse label rule must be one of {REUSE_LABEL_RULES}, got {rule!r}")
    if not decision.changed_by_memory:
        return 0
    if rule == "draft":
        if draft_outcome is None:
            raise ValueError("the 'draft' reuse label needs the memory-free draft's outcome")
        a, b = _key(decision.outcome), _key(draft_outcome)
        return (a > b) - (a < b)
    if decision.outcome.solved:
        return 1
    if previous_score is None:
        return 0
    delta = decision.outcome.score - previous_score
    return (delta > 0) - (delta < 0)
