"""ReasoningBank-style strategy memory (Ouyang et al., "ReasoningBank: Scaling Agent Self-Evolving
with Reasoning Memory", ICLR 2026), with the paper's E.2 variants: + MaTTS and + verified feedback.

Source: after each task the agent judges its own trajectory with the LLM (no ground truth) and
distils memory items — a title, a one-sentence description and the content of a strategy — from
successes (what worked) and from failures (what to avoid); items are retrieved by embedding
similarity of the new query to the query they came from (ReasoningBank reports its best results
with one retrieved item) and the memory grows as the agent works through its task stream. MaTTS
(memory-aware test-time scaling, parallel) runs several trajectories per task and distils by
self-contrast across them.

Adapted to the common task interface:

* built online on T_build: each build task is solved with the current memory (top `k` = 1 item
  shown through REVISE_WITH_GUIDANCE), then REASONINGBANK_EXTRACT judges it and writes one item;
  memory is frozen during evaluation (no self-evolution on evaluation tasks, as for every method);
* ``matts=N`` (E.2's "+ MaTTS"): N trajectories per build task from independent LLM samples, one
  item by MATTS_SELF_CONTRAST across them — N times the experience per task, at N times the cost;
* ``verified=True`` (E.2's "+ verified feedback", the paper's own variant): the extractor sees
  every attempt's checked score (REASONINGBANK_VERIFIED) and keeps ReasoningBank's item format —
  no applicability condition, no pairwise local-edit verification, no selector.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import Task
from cm_gym.llm.base import MATTS_SELF_CONTRAST, REASONINGBANK_EXTRACT, REASONINGBANK_VERIFIED
from cm_gym.llm.parsers_mechanisms import parse_strategy
from cm_gym.memory.alternatives import prompt_fields
from cm_gym.studies.mechanisms.bank import ItemBank, MemoryItem, item_id
from cm_gym.studies.mechanisms.base import (
    DecisionContext,
    Guidance,
    MechanismContext,
    MemoryMechanism,
    ProgressFn,
)
from cm_gym.studies.mechanisms.experience import Trajectory, collect


class ReasoningBank(MemoryMechanism):
    """Strategies distilled from self-judged trajectories, retrieved by query similarity."""

    name = "reasoningbank"
    label = "ReasoningBank"
    source = "Ouyang et al., ReasoningBank: Scaling Agent Self-Evolving with Reasoning Memory, ICLR 2026"
    adapted = (
        "built online on T_build; one strategy (title, description, content) per build task from "
        "the LLM-judged trajectory; top-1 by similarity to the source question; frozen at "
        "evaluation; no conditions, no verification of a local edit."
    )

    def __init__(
        self, k: int = 1, matts: int = 1, verified: bool = False, token_budget: int | None = None
    ) -> None:
        super().__init__(token_budget)
        if matts < 1:
            raise ValueError(f"matts must be >= 1 (trajectories per build task), got {matts}")
        self.k, self.matts, self.verified, self.token_budget = (
            int(k),
            int(matts),
            bool(verified),
            token_budget,
        )
        self.bank: ItemBank | None = None

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.matts > 1:
            out["label"] = f"ReasoningBank + MaTTS (N = {self.matts})"
        if self.verified:
            out["label"] = "ReasoningBank + verified feedback"
        return out

    def _distil(self, ctx: MechanismContext, task: Task, runs: list[Trajectory]) -> str:
        if self.matts > 1:
            text = "\n\n".join(f"Trajectory {i}:\n{t.render(limit=2900)}" for i, t in enumerate(runs, 1))
            template, extra = MATTS_SELF_CONTRAST, {"trajectories": text}
        else:
            template = REASONINGBANK_VERIFIED if self.verified else REASONINGBANK_EXTRACT
            extra = {"trajectory": runs[0].render(scores=self.verified)}
        completion = ctx.llm.complete(
            template, prompt_fields(ctx.domain, runs[0].state, ctx.agent_kind, **extra)
        )
        self.build_cost.charge(completion)
        s = parse_strategy(completion.text)
        return f"Strategy: {s.title}\n{s.description}\n{s.content}"

    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        self.bank = ItemBank(ctx.embedder)
        for task in self.build_tasks(tasks, progress):
            runs = [
                collect(
                    ctx if j == 0 else dataclasses.replace(ctx, llm=ctx.sample_llm(j)),
                    task,
                    self.build_cost,
                    self,
                )
                for j in range(self.matts)
            ]
            text = self._distil(ctx, task, runs)
            self.bank.add(
                MemoryItem(item_id("strategy", task.task_id, text), text, task.prompt, task.task_id)
            )
        self.build_info["strategies"] = len(self.bank)

    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        return self.bank.guidance(d.task, self.k) if self.bank is not None else None

    def state_dict(self) -> dict[str, Any]:
        return {"bank": self.bank.to_json() if self.bank is not None else []}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.bank = ItemBank.from_json(state["bank"])
