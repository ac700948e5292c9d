"""No augmentation: the base agent alone (Table 1's "None" rows). Reflexion keeps its in-task
reflections, as in every other row."""

from __future__ import annotations

from cm_gym.agent import Cost
from cm_gym.studies.mechanisms.base import Choice, DecisionContext, MechanismContext, MemoryMechanism


class NoMemory(MemoryMechanism):
    """Executes the memory-free draft at every decision."""

    name = "none"
    label = "None"
    source = "the base agent: ReAct (Yao et al., 2023) or Reflexion (Shinn et al., 2023)"
    adapted = "nothing: no memory, no retrieval."
    retrieves = False

    def decide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Choice:
        return Choice(d.draft)
