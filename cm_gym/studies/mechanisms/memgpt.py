"""MemGPT-style paged working context (Packer et al., "MemGPT: Towards LLMs as Operating
Systems", arXiv:2310.08560, 2023).

Source: the LLM manages a hierarchy of memory through function calls — a small main context
(working context) that is always in the prompt and large external archival storage; the model
itself inserts into archival storage and pages entries into its working context with
``archival_memory_search``, evicting what no longer fits.

Adapted to the common task interface:

* after each build task the LLM writes one archival entry about it (MEMGPT_ARCHIVE); the archive
  is built online (later build tasks can page in earlier entries);
* during a task the working context holds at most `pages` entries; at each decision the LLM
  decides whether to search (MEMGPT_SEARCH — each such call is charged to the task run) and the
  top `pages` hits for its query are paged in, least recently paged out first;
* the working context is emptied at the start of each task and the archive is frozen during
  evaluation (nothing is inserted from evaluation tasks);
* the working context is shown through REVISE_WITH_GUIDANCE. Nothing is verified as a local edit
  and nothing says when an entry applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import Task
from cm_gym.llm.base import MEMGPT_ARCHIVE, MEMGPT_SEARCH
from cm_gym.llm.parsers_mechanisms import parse_labelled, parse_search
from cm_gym.memory.alternatives import prompt_fields
from cm_gym.studies.mechanisms.bank import ItemBank, MemoryItem, item_id
from cm_gym.studies.mechanisms.base import (
    DecisionContext,
    Guidance,
    MechanismContext,
    MemoryMechanism,
    ProgressFn,
    render_guidance,
)
from cm_gym.studies.mechanisms.experience import collect


class MemGPT(MemoryMechanism):
    """Archival storage written by the LLM, paged into a small working context on its request."""

    name = "memgpt"
    label = "MemGPT"
    source = "Packer et al., MemGPT: Towards LLMs as Operating Systems, arXiv:2310.08560, 2023"
    adapted = (
        "one LLM-written archival entry per build task (built online); during a task the LLM "
        "decides when to search and pages the top hits into a working context of a few entries "
        "(emptied per task); no verification, no conditions."
    )

    def __init__(self, pages: int = 2, token_budget: int | None = None) -> None:
        super().__init__(token_budget)
        self.pages = int(pages)
        self.archive: ItemBank | None = None
        self.context: list[MemoryItem] = []

    def begin_task(self, task: Task) -> None:
        self.context = []

    def build(self, ctx: MechanismContext, tasks: Sequence[Task], progress: ProgressFn | None = None) -> None:
        self.archive = ItemBank(ctx.embedder)
        for task in self.build_tasks(tasks, progress):
            traj = collect(ctx, task, self.build_cost, mechanism=self)
            fields = prompt_fields(ctx.domain, traj.state, ctx.agent_kind, trajectory=traj.render())
            completion = ctx.llm.complete(MEMGPT_ARCHIVE, fields)
            self.build_cost.charge(completion)
            entry = parse_labelled(completion.text, "ENTRY", MEMGPT_ARCHIVE)
            self.archive.add(MemoryItem(item_id("archival", task.task_id), entry, entry, task.task_id))
        self.context = []
        self.build_info["archival_entries"] = len(self.archive)

    def guide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Guidance | None:
        if self.archive is None or not len(self.archive):
            return None
        shown = render_guidance([it.guidance() for it in self.context])[0] or "(empty)"
        fields = prompt_fields(ctx.domain, d.state, ctx.agent_kind, working_context=shown)
        completion = ctx.llm.complete(MEMGPT_SEARCH, fields)
        cost.charge(completion)
        query = parse_search(completion.text, d.task.prompt)
        if query is not None:
            for hit, _ in self.archive.top_k(query, self.pages, d.task.task_id):
                self.context = [it for it in self.context if it.item_id != hit.item_id] + [hit]
            self.context = self.context[-self.pages :]
        if not self.context:
            return None
        return Guidance(tuple(it.guidance() for it in self.context), len(self.context))

    def state_dict(self) -> dict[str, Any]:
        return {"archive": self.archive.to_json() if self.archive is not None else []}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.archive = ItemBank.from_json(state["archive"])
        self.context = []
