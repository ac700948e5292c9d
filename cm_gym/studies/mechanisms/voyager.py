"""Voyager-style verified skill library (Wang et al., "Voyager: An Open-Ended Embodied Agent with
Large Language Models", TMLR 2024).

Source: Voyager keeps a library of skills — programs that passed self-verification — indexed by an
embedding of an LLM-written description; for a new task it retrieves the top-5 skills by
similarity of the task to the descriptions and puts their code in the prompt. Skills are added as
the agent explores, so later tasks use earlier skills.

Adapted to the common task interface:

* a build task the base agent solved (checked by the task's world model, our stand-in for
  self-verification) becomes a skill: VOYAGER_SKILL writes its name, applicability description
  and steps from the trajectory; the skill keeps the solving action as its code;
* the library is built online (each build task may use the skills of earlier ones);
* at each decision the top `k` skills by cos(φ(question), φ(description)) are shown
  (k = 3 here, the same retrieval budget as CounterMem's, instead of Voyager's 5). Skills are whole
  verified solutions of *other* tasks, with no statement of when they apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import Task
from cm_gym.llm.base import VOYAGER_SKILL
from cm_gym.llm.parsers_mechanisms import parse_skill
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


class Voyager(MemoryMechanism):
    """A library of verified solutions, retrieved by description similarity."""

    name = "voyager"
    label = "Voyager"
    source = "Wang et al., Voyager: An Open-Ended Embodied Agent with Large Language Models, TMLR 2024"
    adapted = (
        "skills = build tasks solved (checked by the world model), written up by VOYAGER_SKILL "
        "with the solving action as code; built online; top-k (k = 3) by description similarity; "
        "no conditions."
    )

    def __init__(self, k: int = 3, token_budget: int | None = None) -> None:
        super().__init__(token_budget)
        self.k = int(k)
        self.library: ItemBank | None = None

    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        self.library = ItemBank(ctx.embedder)
        for task in self.build_tasks(tasks, progress):
            traj = collect(ctx, task, self.build_cost, mechanism=self)
            if traj.solved:
                fields = prompt_fields(ctx.domain, traj.state, ctx.agent_kind, trajectory=traj.render())
                completion = ctx.llm.complete(VOYAGER_SKILL, fields)
                self.build_cost.charge(completion)
                skill = parse_skill(completion.text)
                text = (
                    f"Skill {skill.name}: {skill.description}\nSteps: {skill.steps}\n"
                    f"Code:\n```\n{traj.final_action}\n```"
                )
                self.library.add(
                    MemoryItem(item_id("skill", task.task_id), text, skill.description, task.task_id)
                )
        self.build_info["skills"] = len(self.library)

    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        return self.library.guidance(d.task, self.k) if self.library is not None else None

    def state_dict(self) -> dict[str, Any]:
        return {"library": self.library.to_json() if self.library is not None else []}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.library = ItemBank.from_json(state["library"])
