"""Module I: the generator G(s, a, o; K) of local alternatives to a failed action (paper Eq. 1).

As in the reference implementation (paper B.4), the LLM is asked first for local edits
(GENERATE_LOCAL_ALTERNATIVES, one decision unit each); the domain's rule-based edit operators fill
the remaining slots up to K. With ``adapt=True`` (re-verification on a changed environment,
`cm_gym.memory.reverify`) the domain's adaptation edits (`Domain.adaptation_edits`: an action
adapted to its environment as it is now) come right after the LLM's, before the edit operators. Candidates are de-duplicated (whitespace-insensitive) and never equal
the original action. An LLM failure or an unparseable reply is logged and leaves the slots to the
rule-based operators, never an exception in the middle of a build.

On recorded drafts (issue 32, item 4) Module I may also take *real* alternatives: the outputs that
other published systems gave for the same task (`recorded_alternatives`), real LLM text marked
``source="recorded"``. They come after the LLM's edits and before the rule-based ones; a record
formed from one keeps the whole other query as a⁺, and its contrast key is the domain's diff of
the two (for SQL: of their sqlglot normal forms). Off unless a provider is given.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import TRUNCATION, AgentState, CmGymError, Outcome, Task, truncate
from cm_gym.domains.base import Domain
from cm_gym.llm.base import GENERATE_LOCAL_ALTERNATIVES, LLM
from cm_gym.llm.errors import FATAL_LLM_ERRORS

logger = logging.getLogger(__name__)

#: parse an LLM reply into full edited actions: ``parser(text, original_action) -> list[str]``
AlternativesParser = Callable[[str, str], list[str]]
#: real alternatives of an action: ``recorded(task, action) -> [other systems' outputs]``
RecordedAlternatives = Callable[[Task, str], list[str]]

_WS = re.compile(r"\s+")
_FENCE = re.compile(r"```[\w+-]*\n(.*?)```", re.S)


def normalise_action(text: str) -> str:
    """Whitespace-insensitive form used to de-duplicate candidates."""
    return _WS.sub(" ", text).strip()


def _fallback_parse(text: str, action: str) -> list[str]:
    """Used only when `cm_gym.llm.prompts` is unavailable: every fenced block is one edit."""
    return [block.strip() for block in _FENCE.findall(text) if block.strip()]


def default_alternatives_parser() -> AlternativesParser:
    """`cm_gym.llm.prompts.parse_alternatives`, or a fenced-block parser if the module is absent."""
    try:
        from cm_gym.llm.prompts import parse_alternatives
    except ImportError:
        logger.debug("cm_gym.llm.prompts.parse_alternatives unavailable; using the fenced-block parser")
        return _fallback_parse
    return parse_alternatives


def prompt_fields(domain: Domain, state: AgentState, agent_kind: str, **extra: Any) -> dict[str, Any]:
    """The common template fields (same as the base agent's) plus `extra`."""
    task = state.task
    fields: dict[str, Any] = {
        "task": task,
        "state": state,
        "agent": agent_kind,
        "question": task.prompt,
        "context": truncate(task.context, TRUNCATION["context"]),
        "state_text": state.render(),
        "action_kind": domain.action_kind,
        "action_format": domain.action_format,
        "decision": state.decision,
    }
    fields.update(extra)
    return fields


@dataclass(frozen=True)
class Alternative:
    """One candidate a′: the whole edited action, the unit it changes, and who proposed it.
    `mark` is the provenance mark of the LLM reply it came from (`Completion.provenance`:
    "real:<system>", "simulated", "" when the backend does not say); "" for a rule-based edit."""

    text: str
    source: str  # "llm", "recorded" (another published system's output) or "rule"
    unit: str = ""
    description: str = ""
    mark: str = ""


class AlternativeGenerator:
    """G: up to `k` local alternatives — LLM edits first, rule-based edit operators fill the rest."""

    def __init__(
        self,
        llm: LLM | None,
        domain: Domain,
        k: int = 4,
        *,
        use_llm: bool = True,
        parser: AlternativesParser | None = None,
        adapt: bool = False,
        recorded: RecordedAlternatives | None = None,
    ) -> None:
        self.llm, self.domain, self.k, self.use_llm = llm, domain, int(k), use_llm and llm is not None
        self.adapt, self.recorded = adapt, recorded
        self.parser = parser or default_alternatives_parser()

    def _llm_edits(
        self, state: AgentState, action: str, outcome: Outcome, cost: Cost, agent_kind: str
    ) -> tuple[list[str], str]:
        """The LLM's edited actions and the provenance mark of its reply."""
        assert self.llm is not None
        units = "\n".join(self.domain.decision_units(action))
        fields = prompt_fields(
            self.domain,
            state,
            agent_kind,
            action=truncate(action, TRUNCATION["action"]),
            last_action=truncate(action, TRUNCATION["action"]),
            feedback=truncate(outcome.feedback, TRUNCATION["feedback"]),
            decision_units=truncate(units, TRUNCATION["decision_units"]),
            k=str(self.k),
        )
        try:
            completion = self.llm.complete(GENERATE_LOCAL_ALTERNATIVES, fields)
        except FATAL_LLM_ERRORS:
            raise  # a replay without this reply, or no server: never a silent fallback
        except CmGymError as exc:
            logger.warning(
                "GENERATE_LOCAL_ALTERNATIVES failed on %s (%s); rule-based edits only",
                state.task.task_id,
                exc,
            )
            return [], ""
        cost.charge(completion)
        mark = completion.provenance or ""
        try:
            return [str(t) for t in self.parser(completion.text, action)], mark
        except Exception as exc:  # noqa: BLE001 - documented fallback: rule-based edits only
            logger.warning(
                "could not parse alternatives for %s (%s): %r", state.task.task_id, exc, completion.text[:300]
            )
            return [], mark

    def generate(
        self, state: AgentState, action: str, outcome: Outcome, cost: Cost, *, agent_kind: str = "react"
    ) -> list[Alternative]:
        """≤ k distinct alternatives to `action`, each different from it (LLM ones first)."""
        seen = {normalise_action(action)}
        out: list[Alternative] = []

        def take(alt: Alternative) -> None:
            key = normalise_action(alt.text)
            if key and key not in seen and len(out) < self.k:
                seen.add(key)
                out.append(alt)

        if self.use_llm and self.k > 0:
            texts, mark = self._llm_edits(state, action, outcome, cost, agent_kind)
            for text in texts:
                take(Alternative(text.strip(), "llm", mark=mark))
        if self.adapt and len(out) < self.k:
            for edit in self.domain.adaptation_edits(state.task, action):
                take(Alternative(edit.text.strip(), "rule", edit.unit, edit.description))
        if self.recorded is not None and len(out) < self.k:
            for text in self.recorded(state.task, action):
                take(Alternative(text.strip(), "recorded"))
        if len(out) < self.k:
            for edit in self.domain.edit_operators(state.task, action):
                take(Alternative(edit.text.strip(), "rule", edit.unit, edit.description))
                if len(out) >= self.k:
                    break
        return out


def recorded_alternatives(
    domain: Domain, kind: str, exclude: str, systems: tuple[str, ...] | None = None
) -> RecordedAlternatives:
    """A provider of real alternatives: for a task, the published outputs of every recorded
    system but `exclude` (or of `systems`), read as actions by the domain (`parse_action`), in
    the systems' sorted order. A task without a recording key or outputs gets none."""
    from cm_gym.llm.recordings import load_recordings

    rows = load_recordings(kind)
    names = tuple(s for s in (systems or rows.systems) if s != exclude)

    def provide(task: Task, action: str) -> list[str]:
        key = domain.recording_key(task)
        if key is None:
            return []
        outputs = (rows.get(key, s) for s in names)
        return [domain.parse_action(o.text) for o in outputs if o is not None and o.text.strip()]

    return provide
