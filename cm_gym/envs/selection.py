"""MemorySelectionEnv: learn when an LLM agent should use a verified counterfactual memory record."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from cm_gym.agent import REUSE_LABEL_RULES, REVISE_MODES, BaseAgent, Cost, reuse_label
from cm_gym.core.types import Action, AgentState, CmGymError, Task
from cm_gym.domains.environment import environment_versions
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.envs import features as F
from cm_gym.envs._actions import InvalidActionError, action_index
from cm_gym.envs._analysis import AnalysisMixin
from cm_gym.envs._loading import (
    EnvConfigError,
    check_arguments,
    check_reset_options,
    check_reward_weights,
    client_limits,
    resolve_llm,
    resolve_store,
    resolve_tasks,
)
from cm_gym.envs._observation import ObservationMixin
from cm_gym.envs._pickling import RebuildOnUnpickle
from cm_gym.envs._profiling import TimedEvaluator, TimedLLM, Timings
from cm_gym.envs._render import RenderMixin
from cm_gym.envs._reward import decision_reward
from cm_gym.envs._transitions import TransitionMixin
from cm_gym.llm.base import LLM
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.retrieval import Retriever

logger = logging.getLogger(__name__)
__all__ = ["InvalidActionError", "MemorySelectionEnv"]


class MemorySelectionEnv(
    ObservationMixin,
    TransitionMixin,
    AnalysisMixin,
    RenderMixin,
    RebuildOnUnpickle,
    gym.Env[np.ndarray, np.int64],
):
    """Selector environment of CounterMem (paper Section 3.4, Appendix C; SPEC §4).

    ## Description

    An episode is one task of a registered benchmark, solved by a frozen LLM agent (ReAct or
    Reflexion) against the benchmark's executable evaluator. At every decision the LLM first
    drafts an action *without memory*; retrieval returns at most ``k`` eligible records from a
    frozen store (records of the current task are excluded, applicability conditions enforced);
    the policy then chooses to skip memory or to let the LLM revise its draft with exactly one
    record; the resulting action is checked by the evaluator on a fork of the state. The store is
    a frozen snapshot and is never written to. With the simulated LLM the env is deterministic
    given the reset seed.

    ## Observation Space

    ``Box(-inf, inf, (98,), float32)``, the layout of `cm_gym.envs.features`: ``[0:32]`` P·E(state
    text), ``[32:64]`` P·E(draft), ``[64:92]`` four slots × (relevance, admission score, estimated
    improvement Δ, reuse utility u, use frequency, helpful-use fraction, validity), ``[92:98]``
    budget features (remaining decisions, remaining evaluator calls, failures, tokens used, last
    attempt's score, decision index; all normalised). Unused slots are zero.

    With ``obs_layout="extended"`` (opt-in, **beyond the paper**) the observation is
    ``Box(-inf, inf, (106,), float32)``: the same 98 dims, then ``[98:106]`` four slots ×
    (applies: the record's a⁻ → a⁺ edit has a site in the draft, `Domain.record_applies`,
    reference-free and without an LLM call; shown before: the record was already used at an
    earlier decision of this episode). Validity stays at indices 70, 77, 84, 91 in both layouts.

    ## Action Space

    ``Discrete(5)``: 0 = skip memory (execute the draft), j ∈ 1..4 = revise with slot j. The mask
    ``[1, valid_1, …, valid_4]`` is `action_masks()` (sb3-contrib; through wrappers
    ``env.get_wrapper_attr("action_masks")()``), ``info["action_mask"]`` and the validity features.
    A masked in-range action runs as skip with ``info["invalid_action"] = True``
    (``strict_actions=True`` raises `InvalidActionError`). A non-integer or out-of-range action
    (7, −1, 1.5, "1", nan, ``True``, arrays of size ≠ 1) raises it in every mode (`envs._actions`).

    With ``action_space="pairs"`` (opt-in, **beyond the paper**: App. A's "combining multiple
    verified records") it is ``Discrete(17)``: 0 = skip, 1..4 = one slot, 5..16 = the ordered slot
    pairs of `features.PAIR_SLOTS` — the LLM revises with both records (REVISE_WITH_RECORDS). A
    pair is valid when both slots are; the mask has 17 entries, derived from the same validity
    features (the observation stays the 98 dims). ``info["pair_use"]`` marks a pair decision and
    ``info["record_id"]`` joins the two ids with "+".

    ## Rendering and pickling

    ``render_mode="ansi"``: the decision as text; ``"rgb_array"``: that text in a fixed-size uint8
    frame (`envs._render`). ``pickle`` round-trips the env mid-episode (`envs._pickling`).

    ## Rewards

    Eq. 10: ``r_t = 1[t = T ∧ solved] − 0.15·δcalls − 0.25·δfailures − 0.02·δtokens/10⁴`` where the
    δ are the evaluator calls, failed evaluated actions and LLM tokens charged to this decision
    (its draft, the revision and, for Reflexion, the reflection). Weights: `reward_weights`.

    ## Episode End

    ``terminated`` is True when the task is solved *or* its decision / evaluator-call budget is
    spent. Budget exhaustion is a true terminal state here, not a time-limit truncation: the
    remaining budget is part of the observation, and the paper's d_t = 1 marks the final decision
    T (target r_T, no bootstrap). ``info["budget_exhausted"]`` tells the two apart. The env never
    truncates; a `TimeLimit` wrapper may.

    ## Arguments

    - ``benchmark``: registered benchmark name ("SQL"), set by the registry for each env id.
    - ``store``: a `FrozenStore`, a snapshot path, or None for the benchmark's default snapshot.
    - ``tasks``: split name ("build", "train", "validation", "eval", "all"; default split, seed
      12345), a list of `Task` or a list of task ids. Default "train".
    - ``split_by``: which split the split names refer to (and whose build side the default store
      is built on): "tasks" (paper App. D.2: sampled by seed, shared ids removed; SpiderSQL's
      default), "databases" / "envs" (environments apart: the "new environment" condition) or
      "shuffled"; None: the benchmark's own (`BenchmarkSpec.split_kind`).
    - ``data``: a data folder in the benchmark's layout (`BenchmarkSpec.data_layout`): split names
      and task ids then refer to its tasks, and the default store is built from them. None: the
      benchmark's own data.
    - ``llm``: an `LLM` or a `make_llm` spec ("simulated", the default; "openai[:model]").
    - ``llm_cache`` (None) and ``llm_cache_mode`` ("rw" | "ro" | "off"): the response cache. A
      non-simulated spec is always cached, in ``llm_cache`` or the default file under
      ``$CM_GYM_CACHE``; "ro" replays only (a miss raises `CacheMissError`, never calls the
      endpoint). An `LLM` instance or the simulator is cached only when ``llm_cache`` is given.
    - ``agent``: "react" or "reflexion". ``llm_seed``: seed of a spec-built LLM.
    - ``max_decisions`` (3), ``max_evaluator_calls`` (None = max_decisions), ``token_budget``
      (20000, only for normalising the tokens feature).
    - ``k`` (3, at most 4): records retrieved; ``use_conditions`` (True): the condition switch (both
      the retrieval filter and the rendered record); ``retrieval``: "matched", "random",
      "shuffled" or "none".
    - ``retrieval_seed``: seed of the "random" / "shuffled" retrieval ablations.
    - ``strict_actions``, ``task_order`` ("random" via ``np_random`` or "sequential", cycling and
      restarting at each seeded reset), ``evaluator_kwargs``, ``reward_weights``,
      ``allow_cross_benchmark``, ``profile`` (time LLM / evaluator / retrieval / features),
      ``score_drafts`` (kept for compatibility: the draft's score is now always reported).
    - ``obs_layout``: "paper" (default, the 98-dim z_t) or "extended" (106 dims, see above).
    - ``reuse_label_rule``: "draft" (default, SPEC §3 *Amended*): when memory changed the action,
      the memory-free draft is also checked on a fork — bookkeeping, never charged to any counter
      or the reward — and ``info["reuse_label"]`` is +1 / 0 / −1 as the executed action scored
      better / the same / worse, ``info["draft_score"]`` its score; "paper": Appendix B.3's rule
      (against the previous attempt).
    - ``action_space``: "single" (default, the paper's Discrete(5)) or "pairs" (see above).
    - ``counterfactuals`` (False): ANALYSIS ONLY, opt-in. Each step's info also holds
      ``counterfactual``: for skip and every valid action at that decision, what ``step(action)``
      would have returned (``solved``, ``score``, ``status``, ``reward``, ``terminated``,
      ``record_id``), each run by the agent and the world model on a fork of the same state with
      the same draft (`AnalysisMixin.counterfactual_table`, cached per task, state, draft and
      record), and ``counterfactual_regret`` (best reward − the executed one). It costs one
      revision and one check per valid action; the executed decision is unchanged.
    - ``revise``: "llm" (default: the LLM revises the draft with the chosen record) or
      "transform" (the record's executable transform, no LLM call; a record without one, or whose
      transform has no site in the draft, leaves the draft unchanged; `cm_gym.agent.BaseAgent`).
    - ``check_env_versions`` (True): retrieval never offers a record verified against another
      content version of its environment than the one this env's tasks have
      (`cm_gym.memory.freshness`); retired records are never offered either way.
    - ``llm_kwargs``: extra keyword arguments for a spec-built LLM (`cm_gym.llm.factory.make_llm`),
      e.g. ``{"revision_rates": "rates.json"}`` for the simulator (`cm-gym calibrate`).
    - ``llm_timeout`` (s), ``llm_max_tokens``, ``llm_retries``, ``llm_concurrency``: the client
      limits of a spec-built real endpoint (`cm_gym.llm.limits`; None: ``CM_GYM_LLM_*``, else
      60 s, 1024, 4, 8). The timeout must exceed one call's latency on the server.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        benchmark: str = "SQL",
        store: Any = None,
        tasks: str | Sequence[Task | str] = "train",
        llm: LLM | str = "simulated",
        llm_cache: str | Path | None = None,
        llm_cache_mode: str = "rw",
        agent: str = "react",
        max_decisions: int = 3,
        max_evaluator_calls: int | None = None,
        token_budget: int = 20_000,
        k: int = 3,
        use_conditions: bool = True,
        retrieval: str = "matched",
        strict_actions: bool = False,
        task_order: str = "random",
        llm_seed: int = 0,
        retrieval_seed: int = 0,
        evaluator_kwargs: Mapping[str, Any] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        allow_cross_benchmark: bool = False,
        score_drafts: bool = False,
        llm_kwargs: Mapping[str, Any] | None = None,
        reuse_label_rule: str = "draft",
        obs_layout: str = "paper",
        action_space: str = "single",
        check_env_versions: bool = True,
        profile: bool = False,
        render_mode: str | None = None,
        data: str | Path | None = None,
        llm_timeout: float | None = None,
        llm_max_tokens: int | None = None,
        llm_retries: int | None = None,
        llm_concurrency: int | None = None,
        split_by: str | None = None,
        counterfactuals: bool = False,
        revise: str = "llm",
    ) -> None:
        self._init_kwargs: dict[str, Any] = {
            k: v for k, v in locals().items() if k not in ("self", "__class__")
        }
        check_arguments(
            retrieval=retrieval,
            task_order=task_order,
            k=k,
            max_decisions=max_decisions,
            max_evaluator_calls=max_evaluator_calls,
            agent=agent,
            render_mode=render_mode,
            reward_weights=reward_weights,
            token_budget=token_budget,
        )
        self.benchmark_spec = get_benchmark(benchmark)
        self.benchmark = self.benchmark_spec.name
        self.domain = get_domain(self.benchmark_spec.domain_name)
        self.data = data
        try:
            self.split_kind = self.benchmark_spec.split_kind(split_by)
        except ValueError as exc:
            raise EnvConfigError(str(exc)) from None
        self.tasks: tuple[Task, ...] = resolve_tasks(self.benchmark_spec, tasks, data, split_by)
        foreign = sorted({t.domain for t in self.tasks} - {self.domain.name})
        if foreign:
            raise EnvConfigError(f"tasks of domain(s) {foreign} given to a {self.domain.name!r} benchmark")
        self._task_index = {t.task_id: i for i, t in enumerate(self.tasks)}
        self.embedder = Embedder()
        self.store = resolve_store(
            store,
            self.benchmark_spec,
            self.domain.name,
            self.embedder.embedder_id,
            allow_cross_benchmark=allow_cross_benchmark,
            data=data,
            split_name=split_by,
        )
        self.agent_kind, self.max_decisions, self.k = agent, int(max_decisions), int(k)
        self.max_evaluator_calls = int(max_evaluator_calls or max_decisions)
        self.token_budget, self.use_conditions, self.retrieval = int(token_budget), use_conditions, retrieval
        self.strict_actions, self.task_order, self.render_mode = strict_actions, task_order, render_mode
        self.reward_weights = check_reward_weights(reward_weights)
        self.timings = Timings()
        self.profile, self.score_drafts = profile, score_drafts
        if reuse_label_rule not in REUSE_LABEL_RULES:
            raise EnvConfigError(
                f"reuse_label_rule must be one of {REUSE_LABEL_RULES}, got {reuse_label_rule!r}"
            )
        self.reuse_label_rule = reuse_label_rule
        self.counterfactuals_in_info = bool(counterfactuals)  # the method `counterfactuals()` keeps its name
        self._cf_cache: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        if obs_layout not in F.OBS_LAYOUTS:
            raise EnvConfigError(f"obs_layout must be one of {F.OBS_LAYOUTS}, got {obs_layout!r}")
        self.obs_layout = obs_layout
        self.obs_dim = F.obs_dim(obs_layout)
        if action_space not in F.ACTION_SPACES:
            raise EnvConfigError(f"action_space must be one of {F.ACTION_SPACES}, got {action_space!r}")
        self.action_space_name, self.n_actions = action_space, F.n_actions(action_space)
        limits = client_limits(llm, llm_timeout, llm_max_tokens, llm_retries, llm_concurrency)
        self.llm = resolve_llm(
            llm,
            llm_seed,
            self.tasks,
            cache=llm_cache,
            cache_mode=llm_cache_mode,
            llm_kwargs={**limits, **dict(llm_kwargs or {})} or None,
        )
        self.evaluator = self.domain.make_evaluator(**dict(evaluator_kwargs or {}))
        llm_used = TimedLLM(self.llm, self.timings) if profile else self.llm
        evaluator_used = TimedEvaluator(self.evaluator, self.timings) if profile else self.evaluator
        if revise not in REVISE_MODES:
            raise EnvConfigError(f"revise must be one of {REVISE_MODES}, got {revise!r}")
        self._agent = BaseAgent(llm_used, self.domain, evaluator_used, kind=agent, revise=revise)
        self._retriever = Retriever(
            self.store,
            self.domain,
            k=self.k,
            use_conditions=use_conditions,
            mode=retrieval,
            seed=retrieval_seed,
            embedder=self.embedder,
            env_versions=environment_versions(self.domain, self.tasks) if check_env_versions else None,
        )
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(self.n_actions)
        self._cursor = 0
        self._task: Task | None = None
        self._state: AgentState | None = None
        self._done = True
        self._reset_counters()

    # -- episode bookkeeping ------------------------------------------------------------------
    def _reset_counters(self) -> None:
        self._decisions = self._calls = self._failures = self._tokens = 0
        self._draft = ""
        self._draft_cost = Cost()
        self._retrieved: list[Any] = []
        self._mask = F.mask_for(0, self.action_space_name)
        self._obs = np.zeros(self.obs_dim, dtype=np.float32)
        self._shown: set[str] = set()  # records used at earlier decisions of this episode
        self._path: tuple[Any, ...] = ()  # the episode's decisions so far (`_transitions`)

    def _next_task(self, options: Mapping[str, Any] | None, seeded: bool) -> Task:
        if options and options.get("task_id") is not None:
            task_id = str(options["task_id"])
            if task_id not in self._task_index:
                raise EnvConfigError(f"task {task_id!r} is not among this env's {len(self.tasks)} tasks")
            return self.tasks[self._task_index[task_id]]
        if self.task_order == "random":
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        if seeded:
            self._cursor = 0
        task = self.tasks[self._cursor % len(self.tasks)]
        self._cursor += 1
        return task

    def _base_info(self) -> dict[str, Any]:
        return {
            "action_mask": self._mask.copy(),
            "task_id": self._task.task_id if self._task else "",
            "decision": self._decisions,
            "n_retrieved": len(self._retrieved),
            "retrieved_ids": [r.record.record_id for r in self._retrieved],
            "next_draft": self._draft,
        }

    # -- Gymnasium API ------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        options = check_reset_options(options)
        super().reset(seed=seed)
        self._task = self._next_task(options, seeded=seed is not None)
        self._blind_task = self._blind(self._task)
        self._state = AgentState(self._task)
        self._reset_counters()
        self._done = False
        start = time.perf_counter()
        self._prepare_first_decision()
        self.timings.add("total", time.perf_counter() - start)
        return self._obs.copy(), self._base_info()

    def action_masks(self) -> np.ndarray:
        """The current mask ``[True, valid_1, …, valid_4]`` (sb3-contrib's MaskablePPO reads it);
        17 entries in the pair action space."""
        return self._mask.copy()

    def _resolve_action(self, action: Any) -> tuple[int, bool]:
        """(action to run, whether it was masked). A non-integer or out-of-range action raises in
        every mode; a masked in-range one runs as skip unless `strict_actions`."""
        a = action_index(action, self.n_actions)
        if self._mask[a]:
            return a, False
        if self.strict_actions:
            raise InvalidActionError(
                f"action {a} is masked (strict_actions=True); valid actions: {np.flatnonzero(self._mask).tolist()}"
            )
        return 0, True

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._done or self._state is None:
            raise CmGymError("step() called on a finished episode: call reset() first")
        a, invalid = self._resolve_action(action)
        start = time.perf_counter()
        entry = self._path_entry(a, invalid)
        key = self._transition_key(entry)
        result = self._replay(key)
        if result is None:
            result = self._step(a, invalid, key)
        self._path = (*self._path, entry)
        self.timings.add("total", time.perf_counter() - start)
        return result

    def _step(
        self, a: int, invalid: bool, key: tuple[Any, ...] | None = None
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        assert self._state is not None
        retrieved, draft, before = self._retrieved, self._draft, self._state
        counterfactual = self.counterfactual_table() if self.counterfactuals_in_info else None
        records = [retrieved[j - 1].record for j in F.action_slots(a, self.action_space_name)]
        views = [self._record_view(r) for r in records]
        previous_score = self._state.last_score if self._state.attempts else None
        if len(views) == 2:  # the opt-in pair action space: REVISE_WITH_RECORDS
            decision = self._agent.decide_with_records(self._state, views, draft=draft)
        else:
            decision = self._agent.decide(self._state, views[0] if views else None, draft=draft)
        self._shown.update(r.record_id for r in records)
        cost = Cost()
        cost.add(self._draft_cost)
        cost.add(decision.cost)
        self._state = decision.state
        self._decisions += 1
        self._calls += cost.evaluator_calls
        self._failures += cost.failures
        self._tokens += cost.tokens
        solved = decision.outcome.solved
        exhausted = self._decisions >= self.max_decisions or self._calls >= self.max_evaluator_calls
        reward, terminated = decision_reward(self.reward_weights, cost, solved, exhausted)
        draft_outcome = None
        if decision.changed_by_memory:  # bookkeeping for the reuse label: never charged
            draft_outcome = self.evaluator.check(before.fork(), Action(draft))
        label = reuse_label(decision, previous_score, draft_outcome, self.reuse_label_rule)
        draft_score = float(draft_outcome.score) if draft_outcome is not None else None
        if terminated:
            self._done = True
            self._terminal_observation()
        else:
            self._prepare_decision()
        info = self._base_info()
        info.update(
            solved=solved,
            score=float(decision.outcome.score),
            evaluator_calls=self._calls,
            failures=self._failures,
            tokens=self._tokens,
            retrieval_attempted=self.retrieval != "none" and self.k > 0,
            retrieved=bool(retrieved),
            n_retrieved=len(retrieved),
            retrieved_ids=[r.record.record_id for r in retrieved],
            record_id=decision.record_id,
            reuse_label=label,
            changed_by_memory=decision.changed_by_memory,
            draft=draft,
            action=decision.action,
            selected=a,
            pair_use=len(records) == 2,
            invalid_action=invalid,
            draft_score=draft_score,
            budget_exhausted=exhausted and not solved,
            outcome_status=decision.outcome.status,
            budget_kind=str((decision.outcome.details or {}).get("budget_kind", "")),
            decision_cost={
                "evaluator_calls": cost.evaluator_calls,
                "failures": cost.failures,
                "tokens": cost.tokens,
                "llm_calls": cost.llm_calls,
            },
        )
        if counterfactual is not None:  # opt-in: every valid action's outcome, from the same state
            info["counterfactual"] = counterfactual
            info["counterfactual_regret"] = max(c["reward"] for c in counterfactual.values()) - reward
        statuses = (decision.outcome.status,) + ((draft_outcome.status,) if draft_outcome is not None else ())
        self._keep_transition(key, statuses, float(reward), terminated, info)
        return self._obs.copy(), float(reward), terminated, False, info

    @property
    def store_path(self) -> Path:
        return Path(self.store.path)
