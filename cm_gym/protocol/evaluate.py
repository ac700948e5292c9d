"""Evaluating policies on T_eval with store and policy frozen: built-in and your policies, one
CF Memory selector per trained layout and seed, paired bootstrap CIs against the baselines."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cm_gym.protocol.config import (
    CI_BASELINES,
    KNOWN_POLICIES,
    LEARNED_POLICIES,
    ProtocolConfig,
    ProtocolError,
    policy_label,
    selector_name,
)
from cm_gym.protocol.stores import Prepared, make_env

logger = logging.getLogger(__name__)


Checkpoints = Mapping[int, str] | Mapping[str, Mapping[int, str]]

#: Why `run_protocol` trains no selector on a store without records, and what CF Memory then is.
EMPTY_STORE_REASON = (
    "the store holds 0 records: at every decision every action but skip is masked, so every policy "
    "equals None; no selector was trained, and CF Memory was evaluated as always-skip (what any "
    "trained selector does there)"
)


def store_is_empty(snapshot: Any) -> bool:
    """True when the frozen snapshot holds no record (nothing for a selector to choose)."""
    return len(snapshot) == 0


def checkpoints_by_layout(checkpoints: Checkpoints) -> dict[str, dict[int, str]]:
    """``{seed: path}`` (paper layout) or ``{layout: {seed: path}}`` → ``{layout: {seed: path}}``."""
    if all(isinstance(v, str) for v in checkpoints.values()):
        return {"paper": {int(k): str(v) for k, v in checkpoints.items()}}  # type: ignore[arg-type]
    return {str(k): {int(s): str(p) for s, p in v.items()} for k, v in checkpoints.items()}  # type: ignore[union-attr]


def make_policy(name: str, env: Any, seed: int, checkpoint: str | None = None) -> Any:
    """A policy by its protocol name; "cf_memory" loads a masked-DQN checkpoint."""
    from cm_gym.agents.baselines import AlwaysSkip, Oracle, RandomValid, TopOne

    if name == "none":
        return AlwaysSkip()
    if name == "top1":
        return TopOne()
    if name == "random":
        return RandomValid(seed=seed)
    if name == "oracle":
        return Oracle(env)
    if name == "cf_memory":
        from cm_gym.agents.masked_dqn import MaskedDQN

        if checkpoint is None:
            raise ProtocolError("cf_memory needs a trained checkpoint")
        if Path(checkpoint).is_dir():  # a learner plugin's checkpoint (`cm-gym train --algo rllib-*`)
            from cm_gym.protocol.learners import load_plugin_checkpoint

            policy = load_plugin_checkpoint(checkpoint)
            if policy is not None:
                return policy
        space = getattr(env, "observation_space", None)  # refuses a checkpoint of another layout
        return MaskedDQN.load(checkpoint, env=None, device="cpu", observation_space=space)
    if name in LEARNED_POLICIES:
        raise ProtocolError(f"{name} learns on T_train: the protocol trains it (`cm_gym.protocol.zoo`)")
    raise ProtocolError(f"unknown policy {name!r}; known: {', '.join(KNOWN_POLICIES)}")


def resolve_policy(cfg: ProtocolConfig, name: str, env: Any, seed: int, checkpoint: str | None) -> Any:
    """A built-in policy by name, or one of `cfg.custom_policies` for this seed."""
    if name in cfg.custom_policies:
        from cm_gym.protocol.custom import instantiate_policy

        return instantiate_policy(name, cfg.custom_policies[name], env, seed)
    return make_policy(name, env, seed, checkpoint)


def evaluate_policies(
    cfg: ProtocolConfig,
    snapshot: Any,
    prepared: Prepared,
    checkpoints: Checkpoints,
    llm: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Evaluate every policy on T_eval with store and policy frozen. Deterministic policies are
    run once and shared across seeds; random and CF Memory run once per seed, CF Memory once per
    trained observation layout (on an env of that layout: same tasks, LLM and world model). Every
    policy carries paired bootstrap CIs against random valid and top-1: over tasks, seeds averaged
    per task (``paired_ci``), and over seeds and tasks (``paired_ci_two_level``); its per-task
    scores by seed are kept (``per_task_scores``) so CIs can be recomputed or pooled. `progress(done, total)` is called
    after each policy × seed run."""
    from cm_gym.envs.metrics import (
        aggregate_seeds,
        paired,
        paired_comparisons,
        per_task_by_seed,
        summarize,
        two_level_comparisons,
    )
    from cm_gym.llm.replies import delta, reply_counts
    from cm_gym.protocol.custom import report_masked
    from cm_gym.protocol.training import run_episodes

    by_layout = checkpoints_by_layout(checkpoints)
    envs: dict[str, Any] = {}
    prefetch = _EpisodePrefetch(cfg, snapshot, prepared, llm)
    names: list[tuple[str, str, str]] = []  # (results key, policy name, layout)
    for name in cfg.policies:
        if name == "cf_memory" and name not in cfg.custom_policies:
            names += [(selector_name(layout), name, layout) for layout in by_layout or {"paper": {}}]
        else:
            names.append((name, name, "paper"))
    results: dict[str, Any] = {}
    learned: dict[str, list[dict[str, Any]]] = {}  # training records of the learned selectors
    episodes_of: dict[str, dict[int, list[dict[str, Any]]]] = {}
    shared = ("none", "top1", "oracle")  # deterministic: one run serves every seed
    empty = store_is_empty(snapshot)

    def untrained_on(name: str, layout: str) -> bool:  # CF Memory on an empty store, no selector given
        return _untrained(cfg, name, empty) and not by_layout.get(layout)

    runs = sum(
        1 if name in shared or untrained_on(name, layout) else len(cfg.seeds) for _, name, layout in names
    )
    done = 0
    for key, name, layout in names:
        if layout not in envs:
            envs[layout] = make_env(
                cfg, snapshot, prepared.split.eval, llm, task_order="sequential", obs_layout=layout
            )
        env, ckpts = envs[layout], by_layout.get(layout, {})
        untrained = untrained_on(name, layout)
        replies_before = reply_counts(llm)
        per_seed: dict[int, list[dict[str, Any]]] = {}
        for seed in cfg.seeds:
            if (name in shared or untrained) and per_seed:
                per_seed[seed] = next(iter(per_seed.values()))
                continue
            if untrained:  # an empty store: skip is the only valid action, whatever a selector learns
                from cm_gym.agents.baselines import AlwaysSkip

                policy = AlwaysSkip()
            elif name in LEARNED_POLICIES and name not in cfg.custom_policies:
                from cm_gym.protocol.zoo import fit_learned

                policy, record = fit_learned(cfg, snapshot, prepared, llm, name, env, seed)
                learned.setdefault(key, []).append(record)
            else:
                policy = resolve_policy(cfg, name, env, seed, ckpts.get(seed))
            prefetch(name, seed, policy, ckpts.get(seed), layout)
            on_masked = "error" if cfg.on_masked == "error" else "count"
            per_seed[seed] = run_episodes(env, policy, prepared.split.eval, on_masked=on_masked)
            done += 1
            if progress:
                progress(done, runs)
        episodes_of[key] = per_seed
        summaries = [summarize(eps) for eps in per_seed.values()]
        masked = sum(e.get("invalid_actions", 0) for eps in per_seed.values() for e in eps)
        report_masked(key, masked, sum(e["decisions"] for eps in per_seed.values() for e in eps))
        results[key] = {
            "label": policy_label(key, cfg.algo, cfg.llm),
            "layout": layout if name == "cf_memory" else None,
            "per_seed": summaries,
            "mean": aggregate_seeds(summaries),
            "masked_actions": masked,
        }
        if key in learned:
            results[key]["training"] = learned[key]
        if untrained:
            results[key]["untrained_reason"] = EMPTY_STORE_REASON
        replies = delta(reply_counts(llm), replies_before)
        if replies is not None:  # the LLM marks its replies real / simulated (recorded:<system>)
            results[key]["replies"] = replies
    if "none" in episodes_of:
        base = next(iter(episodes_of["none"].values()))
        for name, per_seed in episodes_of.items():
            if name != "none":
                results[name]["paired_vs_none"] = [paired(base, eps) for eps in per_seed.values()]
    for name, comparisons in paired_comparisons(episodes_of, CI_BASELINES).items():
        results[name]["paired_ci"] = comparisons
    scores_of = {name: per_task_by_seed(per_seed) for name, per_seed in episodes_of.items()}
    for name, comparisons in two_level_comparisons(scores_of, CI_BASELINES).items():
        results[name]["paired_ci_two_level"] = comparisons
        results[name]["per_task_scores"] = scores_of[name]
    for env in envs.values():
        env.close()
    prefetch.close()
    return results


def _untrained(cfg: ProtocolConfig, name: str, empty_store: bool) -> bool:
    """CF Memory on an empty store, where `run_protocol` trains no selector (`EMPTY_STORE_REASON`)."""
    return empty_store and name == "cf_memory" and name not in cfg.custom_policies


class _EpisodePrefetch:
    """With a real LLM behind a writable cache and `cfg.concurrency` > 1: before a policy's
    evaluation episodes run (one by one, as always), play them all in lockstep on a second env whose
    LLM only records, and fetch their calls concurrently. The episodes then replay from the cache:
    the results are those of the sequential run, whatever the concurrency."""

    def __init__(self, cfg: ProtocolConfig, snapshot: Any, prepared: Prepared, llm: Any) -> None:
        from cm_gym.llm.batch import RecordingLLM
        from cm_gym.llm.cached import cached_llm_of

        self.cached = cached_llm_of(llm) if cfg.concurrency > 1 else None
        self.cfg, self.task_ids, self.snapshot = cfg, prepared.split.eval, snapshot
        self.envs: dict[str, Any] = {}  # one recording env per observation layout
        self.recording = RecordingLLM(self.cached) if self.cached is not None else None

    def __call__(
        self, name: str, seed: int, policy: Any, checkpoint: str | None, layout: str = "paper"
    ) -> None:
        if self.cached is None:
            return
        from cm_gym.agent.prefetch import prefetch_episodes

        if layout not in self.envs:
            self.envs[layout] = make_env(
                self.cfg,
                self.snapshot,
                self.task_ids,
                self.recording,
                task_order="sequential",
                obs_layout=layout,
            )
        env = self.envs[layout]
        ahead = make_policy(name, env, seed, checkpoint) if name == "oracle" else policy
        if hasattr(ahead, "bound_to"):  # a learned selector reads its decision's records from the env
            ahead = ahead.bound_to(env)
        stats = prefetch_episodes(env, ahead, self.task_ids, self.cached, concurrency=self.cfg.concurrency)
        logger.info(
            "prefetched %d LLM calls for %s (seed %d) in %.1f s", stats.calls, name, seed, stats.seconds
        )

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
