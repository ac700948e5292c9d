"""The `MemoryMechanism` protocol: build from T_build, guide each decision, report costs.

A memory mechanism is what Table 1 varies: the same base agent (ReAct / Reflexion), the same
frozen LLM and the same evaluator, with a different way of turning earlier tasks into guidance.
Every mechanism

* **builds** from the build tasks through a `MechanismContext` (agent, LLM, evaluator), charging
  what that costs to `build_cost` (construction, kept apart from the task run);
* **decides** each later decision through `decide`: given the memory-free draft, return the action
  to execute — by default the draft revised with the mechanism's `guide` output through
  REVISE_WITH_GUIDANCE, charging what that costs (the task run's memory cost);
* is **frozen** during evaluation: nothing learned on an evaluation task is written back;
* can be **saved** (`state_dict`) so a built mechanism is a cacheable unit of work.

The shared decision loop that drives a mechanism over tasks is `cm_gym.studies.mechanisms.episode`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from cm_gym.agent import Cost
from cm_gym.core.types import TRUNCATION, CmGymError, Task, truncate
from cm_gym.llm.base import REVISE_WITH_GUIDANCE
from cm_gym.memory.alternatives import prompt_fields
from cm_gym.studies.mechanisms.context import Choice, DecisionContext, MechanismContext  # Choice: here too
from cm_gym.studies.mechanisms.episode import run_episodes as _run_episodes

logger = logging.getLogger(__name__)

#: ``progress(done, total)`` during a build
ProgressFn = Callable[[int, int], None]


class MechanismError(CmGymError):
    """A memory mechanism cannot be built, loaded or run as configured."""


@dataclass(frozen=True)
class GuidanceItem:
    """One piece of memory shown to the LLM: `text` is exactly what it reads (a worked
    BEFORE/AFTER example inside it is how the simulated LLM reads a change)."""

    item_id: str
    text: str
    source_task_id: str = ""


@dataclass(frozen=True)
class Guidance:
    """What a mechanism shows at one decision (`items`, in order), and how many it retrieved."""

    items: tuple[GuidanceItem, ...]
    retrieved: int = 0


def render_guidance(items: Sequence[GuidanceItem], limit: int = TRUNCATION["trajectory"]) -> tuple[str, int]:
    """The items as numbered blocks, whole items only, within `limit` characters; returns the
    text and how many items it holds (an item is never cut in the middle)."""
    blocks: list[str] = []
    used = 0
    for i, item in enumerate(items, start=1):
        block = f"[{i}] {item.text.strip()}"
        if blocks and used + len(block) + 2 > limit:
            break
        blocks.append(truncate(block, limit) if not blocks else block)
        used += len(block) + 2
    return "\n\n".join(blocks), len(blocks)


class MemoryMechanism:
    """Base class of every memory mechanism (see the module docstring). Subclasses set `name`,
    `label`, `source` (the paper it adapts) and `adapted` (what was changed to fit the common
    task interface), and override `build` and `guide` (or `decide`)."""

    name: ClassVar[str]
    label: ClassVar[str]
    source: ClassVar[str] = ""
    adapted: ClassVar[str] = ""
    #: whether the mechanism retrieves at each decision (its retrieval coverage is then reported)
    retrieves: ClassVar[bool] = True

    def __init__(self, token_budget: int | None = None) -> None:
        #: construction stops once `build_cost` reaches this many tokens (E.2); None = no limit
        self.token_budget = token_budget
        self.build_cost = Cost()
        self.build_info: dict[str, Any] = {}

    def build_tasks(self, tasks: Sequence[Task], progress: ProgressFn | None = None) -> Iterator[Task]:
        """The build tasks in order while the token budget lasts; counts them in
        ``build_info["tasks"]`` and reports progress after each."""
        self.build_info["tasks"] = 0
        for i, task in enumerate(tasks, start=1):
            if self.token_budget is not None and self.build_cost.tokens >= self.token_budget:
                return
            yield task
            self.build_info["tasks"] = i
            if progress is not None:
                progress(i, len(tasks))

    # -- construction -----------------------------------------------------------------------
    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        """Build memory from the build tasks (default: nothing to build)."""

    # -- one task ---------------------------------------------------------------------------
    def begin_task(self, task: Task) -> None:
        """Called before the first decision of each task (per-task working state resets here)."""

    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        """The memory to show at this decision, or None (default: none)."""
        return None

    def decide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Choice:
        """The action to execute: the draft revised with this decision's guidance, if any."""
        guidance = self.guide(ctx, d, cost)
        if guidance is None or not guidance.items:
            return Choice(d.draft, retrieval_attempted=self.retrieves, n_retrieved=0)
        action, shown = revise_with_guidance(ctx, d, guidance, self.label, cost)
        return Choice(action, shown, retrieval_attempted=self.retrieves, n_retrieved=guidance.retrieved)

    def run_episodes(
        self,
        ctx: MechanismContext,
        tasks: Sequence[Task],
        *,
        score_drafts: bool = True,
        progress: ProgressFn | None = None,
    ) -> list[dict[str, Any]]:
        """One frozen episode per task through the shared loop (`cm_gym.studies.mechanisms.episode`)."""
        return _run_episodes(self, ctx, tasks, score_drafts=score_drafts, progress=progress)

    # -- persistence ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything `load_state_dict` needs to restore the built mechanism (JSON-serialisable)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` saved."""

    def describe(self) -> dict[str, Any]:
        """Name, label, source and adaptation (for reports)."""
        return {"name": self.name, "label": self.label, "source": self.source, "adapted": self.adapted}


def revise_with_guidance(
    ctx: MechanismContext, d: DecisionContext, guidance: Guidance, mechanism: str, cost: Cost
) -> tuple[str, tuple[str, ...]]:
    """One REVISE_WITH_GUIDANCE call: the draft and the guidance (whole items within the field
    limit) → the revised action (the draft when the reply holds no action). Returns the action
    and the ids of the items shown."""
    text, n = render_guidance(guidance.items)
    fields = prompt_fields(
        ctx.domain,
        d.state,
        ctx.agent_kind,
        draft=truncate(d.draft, TRUNCATION["draft"]),
        guidance=text,
        mechanism=mechanism,
    )
    completion = ctx.llm.complete(REVISE_WITH_GUIDANCE, fields)
    cost.charge(completion)
    revised = ctx.domain.parse_action(completion.text)
    return revised or d.draft, tuple(item.item_id for item in guidance.items[:n])
