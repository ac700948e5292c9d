"""The LLM protocol every backend implements: one call from a template name and fields to text.

Everything above it (agent loop, construction, env) depends only on this protocol. `fields` may
carry non-string objects (the `Task`, the `AgentState`): templates render only their own string
fields, and the simulated LLM may read the objects (see `llm/simulated.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

# Template names (paper Table 7). Their text, versions and parsers live in `llm/prompts.py`.
DRAFT_ACTION = "DRAFT_ACTION"
REVISE_WITH_RECORD = "REVISE_WITH_RECORD"
#: Beyond the paper (App. A's "combining multiple verified records"): revise with two records.
REVISE_WITH_RECORDS = "REVISE_WITH_RECORDS"
GENERATE_LOCAL_ALTERNATIVES = "GENERATE_LOCAL_ALTERNATIVES"
DISTIL_RECORD = "DISTIL_RECORD"
RECORD_RENDER = "RECORD_RENDER"
RECORD_RENDER_NO_CONDITION = "RECORD_RENDER_NO_CONDITION"
BEST_OF_N_JUDGE = "BEST_OF_N_JUDGE"
REFLECT = "REFLECT"
# Memory-mechanism baselines (paper Table 7 and D.5; texts in `llm/prompts_mechanisms.py`).
REVISE_WITH_GUIDANCE = "REVISE_WITH_GUIDANCE"
EXPEL_INSIGHT = "EXPEL_INSIGHT"
GENERATIVE_AGENTS_IMPORTANCE = "GENERATIVE_AGENTS_IMPORTANCE"
GENERATIVE_AGENTS_REFLECT = "GENERATIVE_AGENTS_REFLECT"
VOYAGER_SKILL = "VOYAGER_SKILL"
MEMGPT_ARCHIVE = "MEMGPT_ARCHIVE"
MEMGPT_SEARCH = "MEMGPT_SEARCH"
REASONINGBANK_EXTRACT = "REASONINGBANK_EXTRACT"
MATTS_SELF_CONTRAST = "MATTS_SELF_CONTRAST"
REASONINGBANK_VERIFIED = "REASONINGBANK_VERIFIED"


@dataclass(frozen=True)
class Completion:
    """An LLM reply with its token accounting. `cached` marks a replay from the response cache
    (the tokens are what the call *would* have cost); `estimated` marks counts not reported by the
    server. `provenance` says where the text came from, where the backend knows
    (`cm_gym.llm.replies`): ``"real:<system>"`` (a real system's published output, verbatim),
    ``"simulated"`` (written by the simulator) or ``""`` (not said)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False
    estimated: bool = False
    provenance: str = ""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@runtime_checkable
class LLM(Protocol):
    """A frozen LLM: `complete(template, fields) -> Completion`."""

    name: str

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion: ...


def estimate_tokens(text: str) -> int:
    """Rough token count (≈ 4 characters per token), used where a server reports no usage and by
    the simulated LLM, so both count on the same rendered templates."""
    return max(1, math.ceil(len(text) / 4)) if text else 0
