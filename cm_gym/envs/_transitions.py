"""The transition memo of the selection env: a decision it already made, replayed exactly (issue 35).

With an LLM whose replies are pure (`SimulatedLLM.pure_replies`) a decision is a function of the
task, the actions taken since `reset` (each under the store revision it was taken with) and the
env's configuration: the same draft, revision, check, reflection, next draft, retrieved records,
observation and mask. Training revisits the same (task, actions so far) again and again — on
SQL-v0 a third of the first 2,000 random decisions, and nearly all of them later — so `step`
replays what such a decision left instead of deciding it again: the agent state, the counters, the
records shown, the next decision (draft, its cost, retrieved records, observation, mask), the
agent's provenance marks, the reward, the termination and the info.

Never memoised:
- an LLM that does not say its replies are pure (a cached, recorded, real, timed or wrapped one)
  and ``counterfactuals=True`` (its table is built from the live state at every step);
- a decision whose verdict, or its draft's bookkeeping verdict, has another status than "ok": a
  hang guard, a CPU or memory kill or a crash could go otherwise next time, so it is decided
  afresh every time.

What a replay does not do: call the LLM or the world model, so *their* counters (an LLM's usage,
an evaluator's memo hits) do not move; the env's counters, rewards and infos — what a policy and
the env's metrics see — are those of the first time, field for field
(`tests/envs/test_transition_memo.py` runs the same decisions with and without the memo).
The memo is per env instance, bounded (`TRANSITION_MEMO_SIZE`, cleared when full), and every
array and container it hands out is a copy. It keeps what it can in forms Python's cyclic garbage
collector need not scan: the records shown as a tuple of ids, and the info as one tuple of keys
(shared by the env's decisions) beside a tuple of values, a list or dict value kept as a tuple (a
tuple of atoms or arrays is untracked once the collector has seen it). On SQL-v0 a first process's
2,000 decisions leave the collector 21,300 more objects to walk instead of 25,100 (docs/speed.md,
fifteenth round).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from cm_gym.agent import Cost
from cm_gym.core.types import AgentState

#: decisions kept per env (cleared when full): under 5 KB each on SQL-v0 (measured with
#: tracemalloc over 6,000 decisions), so under 40 MB per env when full
TRANSITION_MEMO_SIZE = 8_192


class Transition(NamedTuple):
    """What one decision left on the env (see the module doc). Its arrays are read-only and shared
    with the env that made it (the env never changes an observation or mask in place)."""

    state: AgentState
    counters: tuple[int, int, int, int]  # decisions, evaluator calls, failures, tokens
    shown: tuple[str, ...]  # the ids of the records shown so far (a set on the env)
    done: bool
    retrieved: tuple[Any, ...]
    draft: str
    draft_cost: tuple[int, ...]  # the next draft's `Cost`, field by field
    marks: tuple[Any, ...]
    obs: np.ndarray
    mask: np.ndarray
    reward: float
    terminated: bool
    info_keys: tuple[str, ...]  # the info's keys in order (one tuple per env, shared)
    info_values: tuple[Any, ...]  # its values; a mutable one as `_frozen` keeps it
    mutable: tuple[tuple[int, int], ...]  # (position, `_frozen` kind) of each mutable value


#: how a mutable info value is kept (`_frozen`) and handed out again (`_thawed`)
_ARRAY, _LIST, _DICT = 0, 1, 2


def _frozen(value: Any) -> tuple[int, Any]:
    """(kind, kept form) of a mutable info value: an array copied (read-only), a list as a tuple,
    a dict as a tuple of its items (each a shallow copy)."""
    if isinstance(value, np.ndarray):
        kept = value.copy()
        kept.setflags(write=False)
        return _ARRAY, kept
    if isinstance(value, list):
        return _LIST, tuple(value)
    return _DICT, tuple(dict(value).items())


def _thawed(kind: int, kept: Any) -> Any:
    """The value `_frozen` kept, as a new array, list or dict (a shallow copy of the original)."""
    if kind == _ARRAY:
        return kept.copy()
    return list(kept) if kind == _LIST else dict(kept)


class TransitionMixin:
    """`_path_entry`, `_transition_key`, `_replay` and `_keep_transition` for `MemorySelectionEnv.step`."""

    _task: Any
    _agent: Any
    _retriever: Any
    _state: AgentState | None
    _path: tuple[Any, ...]
    _decisions: int
    _calls: int
    _failures: int
    _tokens: int
    _shown: set[str]
    _done: bool
    _retrieved: list[Any]
    _draft: str
    _draft_cost: Cost
    _obs: np.ndarray
    _mask: np.ndarray
    counterfactuals_in_info: bool
    reward_weights: Any
    max_decisions: int
    max_evaluator_calls: int
    token_budget: int
    reuse_label_rule: str
    k: int
    retrieval: str
    use_conditions: bool

    def _path_entry(self, a: int, invalid: bool) -> tuple[Any, ...]:
        """What the episode's path records of taking action `a` now: the action, whether it was a
        masked one run as skip, and the store revision it is taken under (`step` appends it to
        ``_path`` after every decision, memoised or not)."""
        store = self._retriever.store
        return (a, invalid, store.revision, store.layout_revision)

    def _transition_key(self, entry: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The memo key of the decision `entry` (`_path_entry`) takes now, or None when it must be
        made afresh (see the module doc). It names the task, the path since `reset`, the entry,
        and whatever configuration a user may change between steps."""
        agent = self._agent
        if self.counterfactuals_in_info or not getattr(agent.llm, "pure_replies", False):
            return None
        if not hasattr(agent, "marks"):
            return None
        config = (
            tuple(self.reward_weights.items()),
            self.max_decisions,
            self.max_evaluator_calls,
            self.token_budget,
            self.reuse_label_rule,
            self.k,
            self.retrieval,
            self.use_conditions,
        )
        return (self._task.task_id, self._path, entry, config)

    def _replay(
        self, key: tuple[Any, ...] | None
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]] | None:
        """Leave the env as the memoised decision under `key` did and return what `step` returned
        then (copies), or None when it is not memoised."""
        if key is None:
            return None
        hit: Transition | None = self.__dict__.get("_transitions", {}).get(key)
        if hit is None:
            return None
        self._state = hit.state
        self._decisions, self._calls, self._failures, self._tokens = hit.counters
        self._shown = set(hit.shown)
        self._done = hit.done
        self._retrieved = list(hit.retrieved)
        self._draft, self._draft_cost = hit.draft, Cost(*hit.draft_cost)
        self._agent.restore_marks(hit.marks)
        self._obs, self._mask = hit.obs, hit.mask
        values = list(hit.info_values)
        for at, kind in hit.mutable:
            values[at] = _thawed(kind, values[at])
        return (
            hit.obs.copy(),
            hit.reward,
            hit.terminated,
            False,
            dict(zip(hit.info_keys, values, strict=True)),
        )

    def _keep_transition(
        self, key: tuple[Any, ...] | None, statuses: tuple[str, ...], reward: float, terminated: bool,
        info: dict[str, Any],
    ) -> None:  # fmt: skip
        """Memoise the decision just made under `key` (when it has one and every verdict in it
        has status "ok")."""
        if key is None or any(status != "ok" for status in statuses):
            return
        memo: dict[tuple[Any, ...], Transition] = self.__dict__.setdefault("_transitions", {})
        if len(memo) >= TRANSITION_MEMO_SIZE:
            memo.clear()
        assert self._state is not None
        values = list(info.values())
        mutable = []
        for at, value in enumerate(values):
            if isinstance(value, (np.ndarray, list, dict)):
                kind, values[at] = _frozen(value)
                mutable.append((at, kind))
        keys = tuple(info)
        known: dict[tuple[str, ...], tuple[str, ...]] = self.__dict__.setdefault("_info_keys", {})
        keys = known.setdefault(keys, keys)  # every decision's info has the same keys: one tuple
        self._obs.setflags(write=False)  # shared with the memo from now on
        self._mask.setflags(write=False)
        memo[key] = Transition(
            self._state,
            (self._decisions, self._calls, self._failures, self._tokens),
            tuple(self._shown),
            self._done,
            tuple(self._retrieved),
            self._draft,
            tuple(vars(self._draft_cost).values()),
            self._agent.marks(),
            self._obs,
            self._mask,
            reward,
            terminated,
            keys,
            tuple(values),
            tuple(mutable),
        )
