"""ExpeL-style insights (Zhao et al., "ExpeL: LLM Agents Are Experiential Learners", AAAI 2024).

Source: ExpeL gathers experience on training tasks (Reflexion-style retries), then extracts
natural-language insights by comparing failed and successful attempts and keeps them in a list
whose entries are added, up-voted and down-voted; at inference the insights go into the prompt
together with successful trajectories of similar training tasks (by task similarity) as examples.

Adapted to the common task interface:

* experience = the base agent's own memory-free trajectories on T_build (ReAct or Reflexion);
* one EXPEL_INSIGHT call per build task solved after a failure (the failed and the successful
  attempt); an insight describing the same change as a stored one (same `Domain.contrast_key`)
  up-votes it instead of adding a copy (ExpeL's ADD / UPVOTE; EDIT and DOWNVOTE are not modelled);
* at each decision the LLM sees the `n_insights` most-voted insights (all tasks, no retrieval and
  no applicability check, as in ExpeL) and the `n_examples` most similar successful build
  trajectories, through REVISE_WITH_GUIDANCE. Nothing is verified as a local edit and nothing
  says when an insight applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import AgentState, Task
from cm_gym.llm.base import EXPEL_INSIGHT
from cm_gym.llm.parsers_mechanisms import parse_labelled
from cm_gym.memory.alternatives import prompt_fields
from cm_gym.studies.mechanisms.bank import ItemBank, MemoryItem, item_id
from cm_gym.studies.mechanisms.base import (
    DecisionContext,
    Guidance,
    MechanismContext,
    MemoryMechanism,
    ProgressFn,
)
from cm_gym.studies.mechanisms.experience import collect


class ExpeL(MemoryMechanism):
    """Voted insights from failed → successful attempt pairs, plus similar successful examples."""

    name = "expel"
    label = "ExpeL"
    source = "Zhao et al., ExpeL: LLM Agents Are Experiential Learners, AAAI 2024"
    adapted = (
        "insights from the agent's own failed->solved attempt pairs on T_build (EXPEL_INSIGHT), "
        "deduplicated by up-voting; the most-voted insights plus the most similar successful "
        "trajectory are shown at every decision; no verification of a local edit, no conditions."
    )

    def __init__(self, n_insights: int = 5, n_examples: int = 1, token_budget: int | None = None) -> None:
        super().__init__(token_budget)
        self.n_insights, self.n_examples = int(n_insights), int(n_examples)
        self.insights: list[MemoryItem] = []
        self.examples: ItemBank | None = None

    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        self.examples = ItemBank(ctx.embedder)
        by_key: dict[str, int] = {}
        for task in self.build_tasks(tasks, progress):
            traj = collect(ctx, task, self.build_cost)
            if traj.solved:
                text = f"Task: {task.prompt}\n{traj.render()}"
                self.examples.add(
                    MemoryItem(item_id("example", task.task_id), text, task.prompt, task.task_id)
                )
            fix = traj.correction()
            if fix is not None:
                key = ctx.domain.contrast_key(*fix)
                if key in by_key:
                    old = self.insights[by_key[key]]
                    self.insights[by_key[key]] = replace(old, weight=old.weight + 1)
                else:
                    by_key[key] = len(self.insights)
                    self.insights.append(self._insight(ctx, traj.state, fix, len(self.insights)))
        self.build_info.update(insights=len(self.insights), examples=len(self.examples))

    def _insight(
        self, ctx: MechanismContext, state: AgentState, fix: tuple[str, str], order: int
    ) -> MemoryItem:
        failed = next(a for a in reversed(state.attempts) if a.action == fix[0])
        fields = prompt_fields(
            ctx.domain,
            state,
            ctx.agent_kind,
            failed_action=fix[0],
            successful_action=fix[1],
            feedback=failed.outcome.feedback,
        )
        completion = ctx.llm.complete(EXPEL_INSIGHT, fields)
        self.build_cost.charge(completion)
        text = parse_labelled(completion.text, "INSIGHT", EXPEL_INSIGHT)
        return MemoryItem(item_id("insight", *fix), f"Insight: {text}", text, state.task.task_id, order, 1.0)

    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        ranked = sorted(
            (it for it in self.insights if it.source_task_id != d.task.task_id),
            key=lambda it: (-it.weight, it.order),
        )[: self.n_insights]
        items = [it.guidance() for it in ranked]
        if self.examples is not None:
            hits = self.examples.top_k(d.task.prompt, self.n_examples, d.task.task_id)
            items += [it.guidance() for it, _ in hits]
        return Guidance(tuple(items), len(items)) if items else None

    def state_dict(self) -> dict[str, Any]:
        return {
            "insights": [asdict(it) for it in self.insights],
            "examples": self.examples.to_json() if self.examples is not None else [],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.insights = [MemoryItem(**d) for d in state["insights"]]
        self.examples = ItemBank.from_json(state["examples"])
