"""`CallRequest`: one LLM call as a response cache sees it — its key, the rendered messages and the
fields they came from. `cm_gym.llm.cached` makes them (`CachedLLM.request`) and stores their
replies; `cm_gym.llm.batch` fetches many at once. It sits below both so that neither imports the
other to name it (``from cm_gym.llm.cached import CallRequest`` still works).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CallRequest:
    """One LLM call as the cache sees it: its key, the rendered messages, and the fields it came
    from (kept for backends that answer from fields, like the simulated LLM)."""

    key: str
    template: str
    version: str
    messages: list[dict[str, str]] = field(hash=False)
    task_id: str = ""
    payload: bytes = field(default=b"", repr=False, hash=False)
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False, compare=False)
