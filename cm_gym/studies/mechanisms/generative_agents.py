"""Generative-Agents-style experience stream (Park et al., "Generative Agents: Interactive Simulacra
of Human Behavior", UIST 2023).

Source: a memory stream of observations, each with a creation time, an LLM-rated importance
(1–10) and an embedding; retrieval ranks memories by recency + importance + relevance (each
min-max normalised over the candidates, all weights 1; recency decays by 0.995 per step since the
memory was last accessed); when the summed importance of recent observations passes a threshold
(150), the agent writes reflections over its recent memories, which enter the stream as memories.

Adapted to the common task interface:

* an observation is one build task's trajectory (the question and every attempt with its
  feedback), rated by GENERATIVE_AGENTS_IMPORTANCE; the stream is built online — the agent
  retrieves from the stream while working on later build tasks, as a generative agent acts on
  its memories;
* relevance = cos(φ(question), φ(memory)); time is the build-task index; recency = 0.995^(tasks since creation) — memory is frozen during
  evaluation, so last-access times are not updated;
* after every 150 points of importance, GENERATIVE_AGENTS_REFLECT writes one reflection over the
  most recent observations that fit the prompt, rated like an observation;
* at each decision the top `k` memories by the retrieval score are shown (REVISE_WITH_GUIDANCE).
  Nothing is verified as a local edit and nothing says when a memory applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agent import Cost
from cm_gym.core.types import TRUNCATION, AgentState, Task
from cm_gym.llm.base import GENERATIVE_AGENTS_IMPORTANCE, GENERATIVE_AGENTS_REFLECT
from cm_gym.llm.parsers_mechanisms import parse_importance, parse_labelled
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


def _minmax(x: np.ndarray) -> np.ndarray:
    span = float(x.max() - x.min()) if x.size else 0.0
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


class GenerativeAgents(MemoryMechanism):
    """A memory stream with importance, recency and relevance retrieval, plus reflections."""

    name = "generative_agents"
    label = "Generative Agents"
    source = "Park et al., Generative Agents: Interactive Simulacra of Human Behavior, UIST 2023"
    adapted = (
        "observations = build-task trajectories rated 1-10 by the LLM; reflections every 150 "
        "importance points; retrieval = recency (0.995 per build task) + importance + relevance, "
        "min-max normalised; top-k shown at each decision; no verification, no conditions."
    )

    def __init__(
        self,
        k: int = 3,
        decay: float = 0.995,
        reflect_threshold: float = 150.0,
        token_budget: int | None = None,
    ) -> None:
        super().__init__(token_budget)
        self.k, self.decay, self.reflect_threshold = int(k), decay, reflect_threshold
        self.stream: ItemBank | None = None
        self.now = 0

    def _rate(self, ctx: MechanismContext, state: AgentState, text: str) -> int:
        fields = prompt_fields(ctx.domain, state, ctx.agent_kind, observation=text)
        completion = ctx.llm.complete(GENERATIVE_AGENTS_IMPORTANCE, fields)
        self.build_cost.charge(completion)
        return parse_importance(completion.text)

    def _reflect(self, ctx: MechanismContext, state: AgentState) -> None:
        assert self.stream is not None
        recent, used = [], 0
        for item in reversed(self.stream.items):
            if item.meta.get("kind") != "observation":
                continue
            if used + len(item.text) > TRUNCATION["trajectory"] - 100:
                break
            recent.insert(0, item.text)
            used += len(item.text) + 2
        fields = prompt_fields(ctx.domain, state, ctx.agent_kind, memories="\n\n".join(recent))
        completion = ctx.llm.complete(GENERATIVE_AGENTS_REFLECT, fields)
        self.build_cost.charge(completion)
        text = "Reflection: " + parse_labelled(completion.text, "REFLECTION", GENERATIVE_AGENTS_REFLECT)
        importance = self._rate(ctx, state, text)
        self.stream.add(
            MemoryItem(
                item_id("reflection", text),
                text,
                text,
                "",
                0,
                importance,
                {"kind": "reflection", "time": self.now},
            )
        )

    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        self.stream = ItemBank(ctx.embedder)
        pending = 0.0
        for i, task in enumerate(self.build_tasks(tasks, progress), start=1):
            self.now = i
            traj = collect(ctx, task, self.build_cost, mechanism=self)
            text = f"Task: {task.prompt}\n{traj.render()}"
            importance = self._rate(ctx, traj.state, text)
            self.stream.add(
                MemoryItem(
                    item_id("observation", task.task_id),
                    text,
                    text,
                    task.task_id,
                    0,
                    importance,
                    {"kind": "observation", "time": i},
                )
            )
            pending += importance
            if pending >= self.reflect_threshold:
                self._reflect(ctx, traj.state)
                pending = 0.0
        reflections = sum(1 for it in self.stream.items if it.meta.get("kind") == "reflection")
        self.build_info.update(memories=len(self.stream), reflections=reflections)

    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        if self.stream is None or not len(self.stream):
            return None
        eligible = np.flatnonzero(self.stream.eligible(d.task.task_id))
        if eligible.size == 0:
            return None
        items = [self.stream.items[i] for i in eligible]
        relevance = self.stream.similarities(d.task.prompt)[eligible]
        recency = np.array([self.decay ** max(0, self.now - it.meta.get("time", 0)) for it in items])
        importance = np.array([it.weight for it in items], dtype=np.float64)
        score = _minmax(recency) + _minmax(importance) + _minmax(relevance.astype(np.float64))
        order = sorted(range(len(items)), key=lambda j: (-score[j], items[j].order))[: self.k]
        return Guidance(tuple(items[j].guidance() for j in order), len(order))

    def state_dict(self) -> dict[str, Any]:
        return {"stream": self.stream.to_json() if self.stream is not None else [], "now": self.now}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream = ItemBank.from_json(state["stream"])
        self.now = int(state["now"])
