"""The contexts a memory mechanism builds and decides with (`MechanismContext`), one decision of
the shared loop (`DecisionContext`) and a mechanism's answer to it (`Choice`); `base.py` defines
the mechanisms, `episode.py` the loop (which both use these, and neither imports the other's types)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from cm_gym.agent import BaseAgent
from cm_gym.core.types import AgentState, Evaluator, Outcome, Task
from cm_gym.domains.base import Domain
from cm_gym.llm.base import LLM
from cm_gym.memory.embedding import Embedder

logger = logging.getLogger(__name__)


@dataclass
class MechanismContext:
    """What every mechanism builds and decides with: the frozen LLM, the domain's evaluator, the
    base agent over them, and `sampler(i)` — an independent sample of the same LLM (another
    sampling seed; Best-of-N and MaTTS draw several)."""

    domain: Domain
    llm: LLM
    evaluator: Evaluator
    agent_kind: str = "react"
    max_decisions: int = 3
    seed: int = 0
    sampler: Callable[[int], LLM] | None = None
    embedder: Embedder = field(default_factory=Embedder)

    @cached_property
    def agent(self) -> BaseAgent:
        return BaseAgent(self.llm, self.domain, self.evaluator, kind=self.agent_kind)

    def sample_llm(self, i: int) -> LLM:
        """The i-th independent sample of the LLM (i = 0 is the LLM itself)."""
        if i == 0 or self.sampler is None:
            if i:
                logger.warning("no sampler configured: sample %d reuses the LLM", i)
            return self.llm
        return self.sampler(i)


@dataclass(frozen=True)
class DecisionContext:
    """One decision of the shared loop: the state, the memory-free draft and the episode's
    counters before this decision (evaluator calls, failed attempts, tokens), as the selector
    env's budget features count them."""

    task: Task
    state: AgentState
    draft: str
    decision: int
    evaluator_calls: int = 0
    failures: int = 0
    tokens: int = 0
    max_decisions: int = 3


@dataclass(frozen=True)
class Choice:
    """A mechanism's decision: the `action` to execute, the ids of the memory the LLM saw
    (`used`; empty = no memory use), whether retrieval was attempted and how many items it
    returned, and — when the mechanism already checked `action` itself — its `outcome`."""

    action: str
    used: tuple[str, ...] = ()
    retrieval_attempted: bool = False
    n_retrieved: int = 0
    outcome: Outcome | None = None
