"""Run the env and the agent *ahead* of time to find the LLM calls they will make, and make them
concurrently (`cm_gym.llm.batch`). Nothing here changes a result: every reply goes into the
response cache under its key, and the real run replays it in its own order.

* `drive` — the round loop: run every item with a `RecordingLLM`; items that hit an uncached call
  wait while all the calls found in the round are fetched at once; repeat until every item ran.
* `prefetch_first_drafts` — construction: the first draft of every build task needs no memory.
* `prefetch_episodes` — evaluation: every evaluation episode of one policy, played in lockstep.
* `ReachableStates` — `cm-gym tabulate`: every decision state reachable under *any* policy.

States are reached by replaying an action prefix from ``reset`` (all earlier calls are cached by
then); evaluator results are memoised per (state, action) so a replay does not re-run the world
model.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from cm_gym.agent import BaseAgent, Cost
from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.llm.batch import FetchStats, PendingCall, RecordingLLM, fetch_all
from cm_gym.llm.cached import CachedLLM, CallRequest, cached_llm_of
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

Item = TypeVar("Item")


def drive(
    items: Iterable[Item],
    run: Callable[[Item], Sequence[Item]],
    llm: CachedLLM,
    *,
    concurrency: int,
    progress: Any = None,
    max_rounds: int = 100_000,
) -> FetchStats:
    """Run `run(item)` for every item; it returns follow-up items (or nothing) or raises
    `PendingCall`. Pending items are retried after the round's calls are fetched concurrently."""
    stats = FetchStats()
    frontier = list(items)
    for _ in range(max_rounds):
        if not frontier:
            return stats
        pending: dict[str, CallRequest] = {}
        waiting: list[Item] = []
        following: list[Item] = []
        for item in frontier:
            try:
                following.extend(run(item))
            except PendingCall as call:
                pending.setdefault(call.request.key, call.request)
                waiting.append(item)
        if pending:
            stats.add(fetch_all(llm, list(pending.values()), concurrency=concurrency, progress=progress))
        frontier = waiting + following
    raise LLMError(f"gave up after {max_rounds} rounds of prefetching LLM calls")


class MemoEvaluator:
    """An evaluator that remembers each (state, action) outcome: replays need no world model."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._memo: dict[tuple[AgentState, str], Outcome] = {}

    def check(self, state: AgentState, action: Action) -> Outcome:
        key = (state, action.text)
        outcome = self._memo.get(key)
        if outcome is None:
            outcome = self._memo[key] = self.inner.check(state, action)
        return outcome

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)


def memoise_env(env: Any) -> Any:
    """Memoise the world model of a `MemorySelectionEnv` (its agent's and its own evaluator)."""
    base = env.unwrapped
    memo = MemoEvaluator(base.evaluator)
    base.evaluator = memo
    base._agent.evaluator = memo  # the env's agent checks through this attribute
    return env


def prefetch_first_drafts(
    llm: Any, domain: Any, tasks: Sequence[Task], agent_kind: str, *, concurrency: int | None = None
) -> FetchStats:
    """Fetch the first DRAFT_ACTION of every task at once (it depends on no memory, so a build's
    first decisions can all be asked together). A no-op without a writable cache."""
    cached = cached_llm_of(llm)
    if cached is None:
        return FetchStats()
    agent = BaseAgent(RecordingLLM(cached), domain, evaluator=None, kind=agent_kind)  # type: ignore[arg-type]

    def first_draft(task: Task) -> list[Task]:
        agent.draft(AgentState(task), Cost())
        return []

    return drive(tasks, first_draft, cached, concurrency=concurrency or cached.concurrency)


def play_episode(env: Any, policy: Any, task_id: str, seed: int) -> None:
    """One greedy episode of `policy` on `task_id` (as `cm_gym.protocol.training.run_episodes` plays it)."""
    obs, _ = env.reset(seed=seed, options={"task_id": task_id})
    done = False
    while not done:
        action, _ = policy.predict(obs, deterministic=True)
        obs, _, terminated, truncated, _ = env.step(int(np.asarray(action).reshape(-1)[0]))
        done = terminated or truncated


def _fresh(policy: Any) -> Any:
    """A policy copy whose random state restarts (a replayed episode must choose the same way);
    stateless policies (a greedy network, Top-1, the Oracle) are used as they are."""
    if hasattr(policy, "rng"):
        clone = copy.copy(policy)
        clone.rng = copy.deepcopy(policy.rng)
        return clone
    return policy


def prefetch_episodes(
    env: Any,
    policy: Any,
    task_ids: Sequence[str],
    llm: CachedLLM,
    *,
    seed: int = 0,
    concurrency: int | None = None,
) -> FetchStats:
    """Fetch every LLM call of one greedy episode per task at once, on an env whose LLM is a
    `RecordingLLM` over `llm`. Results are then replayed exactly by the sequential evaluation; a
    random policy may wander off what was fetched (its draws continue across episodes there), and
    those few calls are simply made when met."""
    memoise_env(env)

    def episode(item: tuple[int, str]) -> list[tuple[int, str]]:
        play_episode(env, _fresh(policy), item[1], seed + item[0])
        return []

    return drive(list(enumerate(task_ids)), episode, llm, concurrency=concurrency or llm.concurrency)


class ReachableStates:
    """Enumerate every decision state an env can reach on its tasks, under any policy: a node is
    ``(task_id, action prefix)``; expanding it replays the prefix, and if the episode goes on and
    the state is new, yields one child per valid action (skip + each retrieved record). Two paths
    that reach the same attempts and reflections share one subtree (their future prompts are
    identical)."""

    def __init__(self, env: Any) -> None:
        self.env = memoise_env(env)
        self.seen: set[tuple[Any, ...]] = set()
        self.states = 0
        self.terminal = 0

    def roots(self, task_ids: Iterable[str]) -> list[tuple[str, tuple[int, ...]]]:
        return [(task_id, ()) for task_id in task_ids]

    def expand(self, node: tuple[str, tuple[int, ...]]) -> list[tuple[str, tuple[int, ...]]]:
        task_id, prefix = node
        env = self.env.unwrapped
        env.reset(seed=0, options={"task_id": task_id})
        for action in prefix:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                self.terminal += 1
                return []
        state = env._state  # the decision state the policy faces now
        key = (
            task_id,
            tuple((a.action, a.outcome.score, a.outcome.solved, a.outcome.feedback) for a in state.attempts),
            state.reflections,
        )
        if key in self.seen:
            return []
        self.seen.add(key)
        self.states += 1
        return [(task_id, (*prefix, int(a))) for a in np.flatnonzero(env.action_masks())]
