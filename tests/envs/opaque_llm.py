"""An LLM wrapper for the memo tests: the simulator's replies behind an object that does not say
they are pure (`SimulatedLLM.pure_replies`), so the env memoises nothing it decides — the
reference every memo test compares with. A test double, not product."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cm_gym.llm.base import Completion
from cm_gym.llm.simulated import SimulatedLLM


class OpaqueLLM:
    """The simulator behind a wrapper that does not declare its replies pure: no memo."""

    name = "simulated"

    def __init__(self, inner: SimulatedLLM) -> None:
        self.inner = inner

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        return self.inner.complete(template, fields)
