"""WM without CF — the component ablation of paper Fig. 4a ("checks current-task alternatives
without keeping cross-task corrections", D.5).

After a failed decision (at most `max_expansions` per task, as in construction) the generator
proposes up to K = 4 local alternatives of the failed action (LLM edits first, rule-based edit
operators fill the rest: `cm_gym.memory.alternatives.AlternativeGenerator`, the same Module I as
construction), each is checked by the world model from the current state, and the best one that
improves on the failed attempt is executed at the next decision instead of the draft (its check
is that decision's evaluation). Nothing is stored: every task starts with no memory. The checks
count as evaluator calls and failures (the paper's interaction accounting includes counterfactual
checks) but, like construction's verification allowance, not against the solving budget.
"""

from __future__ import annotations

from dataclasses import replace

from cm_gym.agent import Cost
from cm_gym.core.types import Action
from cm_gym.memory.alternatives import AlternativeGenerator
from cm_gym.studies.mechanisms.base import Choice, DecisionContext, MechanismContext, MemoryMechanism


class WMWithoutCF(MemoryMechanism):
    """Current-task counterfactual search with the world model; no cross-task memory."""

    name = "wm_without_cf"
    label = "WM without CF"
    source = "paper §6.1 / D.5 (component ablation)"
    adapted = (
        "after a failed decision, K = 4 local alternatives of the failed action are checked from the "
        "same state and the best improving one is executed next; nothing is kept across tasks."
    )
    retrieves = False

    def __init__(self, K: int = 4, max_expansions: int = 2) -> None:
        super().__init__()
        self.K, self.max_expansions = int(K), int(max_expansions)
        self._expanded = 0

    def begin_task(self, task: object) -> None:
        self._expanded = 0

    def decide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Choice:
        last = d.state.attempts[-1] if d.state.attempts else None
        if last is None or last.outcome.solved or self._expanded >= self.max_expansions:
            return Choice(d.draft)
        self._expanded += 1
        before = replace(d.state, attempts=d.state.attempts[:-1])  # where the failed action was taken
        generator = AlternativeGenerator(ctx.llm, ctx.domain, self.K)
        best = None
        for alt in generator.generate(before, last.action, last.outcome, cost, agent_kind=ctx.agent_kind):
            outcome = ctx.evaluator.check(before.fork(), Action(alt.text))
            cost.evaluator_calls += 1
            cost.failures += int(not outcome.solved)
            if outcome.score > last.outcome.score and (best is None or outcome.score > best[1].score):
                best = (alt.text, outcome)
        if best is None:
            return Choice(d.draft)
        return Choice(best[0], outcome=best[1])
