"""Best-of-N, the paper's compute control (Table 1, D.5): more current-task inference, no memory.

Source: the reference implementation described in the paper's Appendix D.5 — N = 1 + K = 5
candidates and an LLM judge (BEST_OF_N_JUDGE) that picks one to execute; a reply without a valid
``CHOICE: n`` falls back to candidate 1 (Table 7). The verifier never chooses.

Adapted: candidate 1 is the agent's own memory-free draft; candidates 2..N are drafts from
independent samples of the same LLM (other sampling seeds: `MechanismContext.sample_llm`; for the
simulated LLM another seed draws its slips anew). Every candidate and the judge are charged to the
task run. With the simulated LLM the judge is `simulated.py`'s: a seeded uniform choice, i.e. a
judge with no ability to tell candidates apart — a lower bound on a real judge, said plainly. The
simulated samples are independent draws of the error model given the task's features, while one
sample repeats its own slips across decisions (a frozen model at temperature 0); a real model's
samples are likely more correlated than that, which favours this control here.
"""

from __future__ import annotations

from cm_gym.agent import BaseAgent, Cost
from cm_gym.llm.base import BEST_OF_N_JUDGE
from cm_gym.llm.parsers import parse_judge
from cm_gym.memory.alternatives import prompt_fields
from cm_gym.studies.mechanisms.base import Choice, DecisionContext, MechanismContext, MemoryMechanism


class BestOfN(MemoryMechanism):
    """N candidate drafts per decision, one chosen by an LLM judge (no memory)."""

    name = "best_of_n"
    label = "Best-of-N"
    source = "paper Appendix D.5 (compute control); N = 1 + K = 5, LLM judge, fallback to candidate 1"
    adapted = "candidates are drafts from independent LLM samples; the judge never sees the checker."
    retrieves = False

    def __init__(self, n: int = 5) -> None:
        super().__init__()
        if n < 1:
            raise ValueError(f"Best-of-N needs n >= 1, got {n}")
        self.n = int(n)

    def decide(self, ctx: MechanismContext, d: DecisionContext, cost: Cost) -> Choice:
        candidates = [d.draft]
        for i in range(1, self.n):
            sampler = BaseAgent(ctx.sample_llm(i), ctx.domain, ctx.evaluator, kind=ctx.agent_kind)
            candidates.append(sampler.draft(d.state, cost))
        if len(candidates) == 1:
            return Choice(d.draft)
        fields = prompt_fields(
            ctx.domain, d.state, ctx.agent_kind, candidates=candidates, n=str(len(candidates))
        )
        completion = ctx.llm.complete(BEST_OF_N_JUDGE, fields)
        cost.charge(completion)
        return Choice(candidates[parse_judge(completion.text, len(candidates)) - 1])
