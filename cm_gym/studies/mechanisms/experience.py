"""Experience from build tasks: the base agent's trajectories, as the baselines see them.

Every baseline builds from the same thing a real agent would have: the attempts it made on each
build task, with the environment's feedback and whether an attempt solved the task (the base agent
is run by the shared loop, `episode.run_task`, so construction costs are counted exactly as task
runs are). Helpers here turn a trajectory into prompt text and find its correction — the last
failed action before the solving one — which is the only contrast a trajectory holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cm_gym.agent import Cost
from cm_gym.core.types import TRUNCATION, AgentState, Task
from cm_gym.llm.parsers_mechanisms import AttemptText, example_block, render_attempts
from cm_gym.studies.mechanisms.base import MechanismContext, MemoryMechanism
from cm_gym.studies.mechanisms.episode import run_task


@dataclass(frozen=True)
class Trajectory:
    """The attempts the agent made on one build task (final state of the shared loop)."""

    state: AgentState

    @property
    def task(self) -> Task:
        return self.state.task

    @property
    def solved(self) -> bool:
        return any(a.outcome.solved for a in self.state.attempts)

    @property
    def final_action(self) -> str:
        return self.state.attempts[-1].action if self.state.attempts else ""

    def correction(self) -> tuple[str, str] | None:
        """(last failed action, solving action) when the task was solved after a failure."""
        attempts = self.state.attempts
        for i, a in enumerate(attempts):
            if a.outcome.solved:
                failed = [b.action for b in attempts[:i] if not b.outcome.solved and b.action != a.action]
                return (failed[-1], a.action) if failed else None
        return None

    def attempt_texts(self) -> list[AttemptText]:
        return [
            AttemptText(a.action, a.outcome.feedback, a.outcome.solved, float(a.outcome.score))
            for a in self.state.attempts
        ]

    def render(self, *, scores: bool = False, limit: int = TRUNCATION["trajectory"]) -> str:
        """The attempts as prompt text (`render_attempts`); `scores` adds the checked scores."""
        return render_attempts(self.attempt_texts(), limit, scores=scores)

    def example(self) -> str:
        """The correction as a worked BEFORE/AFTER example ("" when there is none)."""
        fix = self.correction()
        return example_block(*fix) if fix else ""


def collect(
    ctx: MechanismContext,
    task: Task,
    cost: Cost,
    mechanism: MemoryMechanism | None = None,
) -> Trajectory:
    """Run the base agent on one build task (with `mechanism`'s guidance when it builds online),
    charging everything to `cost`."""
    run = run_task(mechanism, ctx, task, score_drafts=False)
    cost.add(run.cost)
    return Trajectory(run.state)


def collect_all(ctx: MechanismContext, tasks: Sequence[Task], cost: Cost) -> list[Trajectory]:
    """The memory-free trajectories of all `tasks`, in order."""
    return [collect(ctx, task, cost) for task in tasks]
