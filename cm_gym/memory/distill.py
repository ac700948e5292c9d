"""Record distillation (paper Eq. 3, Table 7 DISTIL_RECORD): situation q and condition c.

The verified contrast goes to the LLM through the DISTIL_RECORD template (the simulated LLM answers
with the domain's rules); the reply is parsed by `cm_gym.llm.prompts.parse_distil` and the
condition by `parse_condition_or_none` (unparseable → "none", logged). If the reply carries no
situation at all, the domain's rule-based `Domain.distil` is used instead (logged), so a malformed
reply never loses a verified correction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import TRUNCATION, AgentState, CmGymError, Outcome, truncate
from cm_gym.domains.base import Domain
from cm_gym.domains.conditions import Condition, describe_predicates, parse_condition_or_none
from cm_gym.llm.base import DISTIL_RECORD, LLM
from cm_gym.llm.errors import FATAL_LLM_ERRORS
from cm_gym.memory.alternatives import prompt_fields
from cm_gym.memory.record import evidence_text

logger = logging.getLogger(__name__)

#: parse a DISTIL_RECORD reply: ``parser(text) -> (situation, condition_text)``
DistilParser = Callable[[str], tuple[str, str]]

_SIT = re.compile(r"^\s*SITUATION\s*:\s*(.*?)\s*$", re.I | re.M)
_COND = re.compile(r"^\s*CONDITION\s*:\s*(.*?)\s*$", re.I | re.M)


def _fallback_parse(text: str) -> tuple[str, str]:
    """Used only when `cm_gym.llm.prompts` is unavailable: ``SITUATION: ...`` / ``CONDITION: ...``."""
    sit, cond = _SIT.search(text), _COND.search(text)
    condition = cond.group(1) if cond else ""
    return (sit.group(1) if sit else ""), ("" if condition.strip().lower() == "none" else condition)


def default_distil_parser() -> DistilParser:
    """`cm_gym.llm.prompts.parse_distil`, or a line-prefix parser if the module is absent."""
    try:
        from cm_gym.llm.prompts import parse_distil
    except ImportError:
        logger.debug("cm_gym.llm.prompts.parse_distil unavailable; using the line-prefix parser")
        return _fallback_parse
    return parse_distil


def evidence_of(o: Outcome, o2: Outcome) -> dict[str, Any]:
    """The evidence e of a verified contrast: both scores, both graded scores (the world model's
    partial credit, `Outcome.graded_score`) and both feedbacks."""
    return {
        "score_minus": float(o.score),
        "score_plus": float(o2.score),
        "graded_minus": float(o.graded_score),
        "graded_plus": float(o2.graded_score),
        "feedback_minus": truncate(o.feedback, TRUNCATION["feedback"]),
        "feedback_plus": truncate(o2.feedback, TRUNCATION["feedback"]),
    }


class Distiller:
    """Turns a verified contrast (a⁻, a⁺, evidence) into its situation q and condition c."""

    def __init__(self, llm: LLM, domain: Domain, *, parser: DistilParser | None = None) -> None:
        self.llm, self.domain = llm, domain
        self.predicates = domain.condition_predicates()
        self.parser = parser or default_distil_parser()
        self._kinds = describe_predicates(self.predicates)

    def fields(
        self, state: AgentState, a_minus: str, a_plus: str, evidence: str, *, agent_kind: str = "react"
    ) -> dict[str, Any]:
        """The DISTIL_RECORD fields of one verified contrast (also what a prefetch asks for)."""
        return prompt_fields(
            self.domain,
            state,
            agent_kind,
            a_minus=truncate(a_minus, TRUNCATION["action"]),
            a_plus=truncate(a_plus, TRUNCATION["action"]),
            evidence=truncate(evidence, TRUNCATION["feedback"]),
            predicate_kinds=self._kinds,
        )

    def distil(
        self,
        state: AgentState,
        a_minus: str,
        a_plus: str,
        evidence: str,
        cost: Cost,
        *,
        agent_kind: str = "react",
    ) -> tuple[str, Condition]:
        """One DISTIL_RECORD call; returns (situation, parsed condition)."""
        fields = self.fields(state, a_minus, a_plus, evidence, agent_kind=agent_kind)
        situation, condition_text = "", ""
        try:
            completion = self.llm.complete(DISTIL_RECORD, fields)
            cost.charge(completion)
            situation, condition_text = self.parser(completion.text)
        except FATAL_LLM_ERRORS:
            raise  # a replay without this reply, or no server: never a silent fallback
        except CmGymError as exc:
            logger.warning("DISTIL_RECORD failed on %s: %s", state.task.task_id, exc)
        except Exception as exc:  # noqa: BLE001 - documented fallback: the domain's rule-based distil
            logger.warning("unparseable DISTIL_RECORD reply on %s: %s", state.task.task_id, exc)
        situation = (situation or "").strip()
        if not situation:
            logger.warning(
                "DISTIL_RECORD gave no situation on %s; using the domain's rules", state.task.task_id
            )
            rule = self.domain.distil(replace(state.task, reference=""), a_minus, a_plus)
            situation, condition_text = rule.situation, rule.condition
        return situation, parse_condition_or_none(condition_text or "", self.predicates)

    def prefetch(
        self,
        state: AgentState,
        a_minus: str,
        o: Outcome,
        plus: list[str],
        outcomes: list[Outcome],
        epsilon: float,
        agent_kind: str,
    ) -> None:
        """With a real LLM behind a writable cache: the DISTIL_RECORD calls of every alternative
        that improved by more than `epsilon` are independent, so fetch them at once; `distil` then
        replays them in order (nothing else changes). A failure here only loses the head start."""
        from cm_gym.llm.cached import cached_llm_of

        cached = cached_llm_of(self.llm)
        if cached is None:
            return
        calls = [
            (
                DISTIL_RECORD,
                self.fields(state, a_minus, a_plus, evidence_text(evidence_of(o, o2)), agent_kind=agent_kind),
            )
            for a_plus, o2 in zip(plus, outcomes, strict=True)
            if o2.completed and o2.score - o.score > epsilon
        ]
        if len(calls) < 2:
            return
        try:
            cached.prefetch(calls)
        except FATAL_LLM_ERRORS:
            raise
        except CmGymError as exc:
            logger.warning("prefetching DISTIL_RECORD calls on %s failed (%s)", state.task.task_id, exc)
