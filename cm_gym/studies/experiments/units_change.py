"""Unit kinds of the `staleness` and `combine` studies (registered with `runner.unit_kind`).

* ``changed_env`` — one change family applied to copies of a benchmark's environments
  (`Domain.apply_change`), written as a changed-environment folder (`domains.environment`).
* ``reverify`` — a store's snapshot re-verified on a changed environment (`memory.reverify`),
  with or without the repair search; its result looks like a store unit's (a ``snapshot``, a
  ``cost``), so the ``evaluate`` unit reads it like any store.
* ``selector_any`` — one masked-DQN seed trained on a store in either action space (the opt-in
  pair space included), the checkpoint chosen on the validation tasks as `protocol` does.
* ``policy_eval`` — a frozen run of a rule, a trained checkpoint or the (analysis-only) oracle in
  either action space, over ordinary task ids or a named task set, logging every record use.

The ``store`` and ``evaluate`` kinds of `units.py` read their tasks from a ``changed_env`` input
when they have one (`units.tasks_for`).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.studies.experiments.unit import ExperimentError, UnitResult, unit_kind
from cm_gym.studies.experiments.units import (
    benchmark_tasks,
    context,
    protocol_config,
    snapshot_path,
    tasks_for,
)


@unit_kind("changed_env")
def changed_env_unit(p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """``family`` applied (seed ``change_seed``) to every task of the benchmark, into ``env/``."""
    from cm_gym.domains.environment import environment_versions, save_environment

    spec = get_benchmark(p["benchmark"])
    domain = get_domain(spec.domain_name)
    tasks = list(benchmark_tasks(p["benchmark"]).values())
    changed, change = domain.apply_change(p["family"], tasks, workdir / "env", seed=int(p["change_seed"]))
    save_environment(
        workdir / "env", changed, change, benchmark=spec.name, domain=domain, seed=int(p["change_seed"])
    )
    before, after = environment_versions(domain, tasks), environment_versions(domain, changed)
    return {
        "env": "env",
        "description": change.description,
        "touched_envs": list(change.touched_envs),
        "new_versions": sorted(e for e in after if after[e] != before.get(e)),
        "rewritten_tasks": len(change.rewritten_tasks),
    }


@unit_kind("reverify")
def reverify_unit(p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """The ``store`` input's snapshot re-verified on the ``env`` input (repairs when ``repair``)."""
    from cm_gym.memory.reverify import ReverifyConfig, report_path, reverify_store
    from cm_gym.memory.snapshot import FrozenStore

    ctx = context(p)
    env = load_env(inputs["env"])
    source = FrozenStore.open(snapshot_path(inputs["store"]))
    cfg = ReverifyConfig(K=int(p.get("K", 4)), repair=bool(p["repair"]), agent_kind=ctx.agent_kind)
    summary = reverify_store(
        source,
        workdir / "snapshot.sqlite",
        env.tasks,
        ctx.domain,
        ctx.evaluator,
        ctx.llm,
        cfg,
        environment=env.label,
    )
    return {
        "snapshot": "snapshot.sqlite",
        "report": report_path(workdir / "snapshot.sqlite").name,
        "checkpoints": {},
        "records": summary.records_out,
        "counts": summary.counts,
        "seconds": summary.seconds,
        "cost": {
            "tokens": summary.tokens,
            "llm_calls": summary.llm_calls,
            "evaluator_calls": summary.evaluator_calls,
        },
    }


@unit_kind("decision_rebuild")
def decision_rebuild_unit(
    p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path
) -> dict[str, Any]:
    """Construction's Module I + II re-run at each record's decision on the changed environment
    (`staleness_measure.decision_truth`): record id → holds / changed / gone. Without an ``env``
    input, on the unchanged benchmark: the reference's own drift (records it would not reproduce
    although nothing changed)."""
    from cm_gym.memory.alternatives import AlternativeGenerator
    from cm_gym.memory.snapshot import FrozenStore
    from cm_gym.studies.experiments.staleness_measure import decision_truth

    ctx = context(p)
    tasks = load_env(inputs["env"]).tasks if "env" in inputs else benchmark_tasks(p["benchmark"]).values()
    by_id = {t.task_id: t for t in tasks}
    generator = AlternativeGenerator(ctx.llm, ctx.domain, int(p.get("K", 4)))
    truth, calls = {}, 0
    for record in FrozenStore.open(snapshot_path(inputs["store"])).records:
        truth[record.record_id], n = decision_truth(
            ctx.domain, record, by_id.get(record.source_task_id), ctx.evaluator, generator
        )
        calls += n
    return {"truth": truth, "evaluator_calls": calls}


def load_env(result: UnitResult) -> Any:
    from cm_gym.domains.environment import load_environment

    return load_environment(result.path("env"))


# -- named task sets -----------------------------------------------------------------------------
def two_error_tasks(candidates: list[Task], llm_seed: int, n: int) -> list[Task]:
    """The candidates whose memory-free first draft (the simulated LLM with `llm_seed`) carries
    exactly two slips, each of which alone already fails the task (so both corrections are
    needed), first `n` in order. Which slips a draft carries is the simulator's draft model."""
    from cm_gym.core.types import Action, AgentState
    from cm_gym.llm.simulated import SimulatedLLM, stable_rng

    llm = SimulatedLLM(seed=llm_seed)
    evaluator = get_domain("sql").make_evaluator()
    out: list[Task] = []
    for task in candidates:
        applied = []
        for op in llm.active_slips(task):
            alone = op.apply(task, task.reference, stable_rng(llm_seed, "apply", task.task_id, op.name))
            if alone is not None and alone != task.reference:
                applied.append(alone)
        if len(applied) != 2:
            continue
        state = AgentState(task)
        draft = llm.draft_action(task)
        if all(not evaluator.check(state, Action(a)).solved for a in (*applied, draft)):
            out.append(task)
        if len(out) >= n:
            break
    return out


def _sql_two_error(p: Mapping[str, Any]) -> list[Task]:
    from cm_gym.domains.sql.twoerror import candidate_tasks

    disjoint = tuple(int(x) for x in p.get("disjoint_from", ()))
    pool = candidate_tasks(
        n=int(p.get("n_candidates", 400)), seed=int(p.get("taskset_seed", 0)), disjoint_from=disjoint
    )
    return two_error_tasks(pool, int(p["llm_seed"]), int(p.get("n_tasks", 60)))


TASKSETS = {"sql_two_error": _sql_two_error}


def policy_tasks(p: Mapping[str, Any], inputs: Mapping[str, UnitResult]) -> list[Task]:
    """The tasks of a policy run: a named task set (``taskset``) or ids of the benchmark."""
    name = p.get("taskset")
    if name:
        if name not in TASKSETS:
            raise ExperimentError(f"unknown task set {name!r}; known: {', '.join(TASKSETS)}")
        return TASKSETS[name](p)
    return tasks_for(p, "task_ids", inputs)


# -- selectors and policies in either action space -------------------------------------------------
@unit_kind("selector_any")
def selector_any_unit(
    p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path
) -> dict[str, Any]:
    """One masked-DQN seed in ``action_space`` ("single" or "pairs") on the store's snapshot."""
    import torch

    from cm_gym.agents.masked_dqn import MaskedDQN
    from cm_gym.memory.snapshot import FrozenStore
    from cm_gym.protocol.stores import make_env
    from cm_gym.protocol.training import CheckpointSelector

    torch.set_num_threads(1)
    cfg, seed = protocol_config(p, workdir), int(p["seed"])
    snapshot = FrozenStore.open(snapshot_path(inputs["store"]))
    by_id = benchmark_tasks(p["benchmark"])
    train = [by_id[i] for i in p["train_ids"]]
    val = [by_id[i] for i in p["validation_ids"]]
    if p.get("train_taskset"):  # extra training tasks (a named task set): 3/4 train, 1/4 validation
        extra = policy_tasks({**p, **p["train_taskset"]}, inputs)
        cut = (3 * len(extra)) // 4
        train, val = train + extra[:cut], val + extra[cut:]
    space = str(p["action_space"])
    env = make_env(cfg, snapshot, train, task_order="random", action_space=space)
    val_env = make_env(cfg, snapshot, val, action_space=space)
    model = MaskedDQN("MlpPolicy", env, seed=seed, verbose=0)
    callback = CheckpointSelector(
        val_env, [t.task_id for t in val], workdir / "ckpt", every=int(p["checkpoint_every"])
    )
    model.learn(total_timesteps=int(p["total_decisions"]), callback=callback, progress_bar=False)
    if callback.best_step < 0:
        callback.evaluate_checkpoint()
    env.close()
    val_env.close()
    shutil.copyfile(callback.best_path, workdir / "selector.zip")
    shutil.rmtree(workdir / "ckpt", ignore_errors=True)
    return {
        "checkpoint": "selector.zip",
        "best_step": callback.best_step,
        "history": callback.history,
        "train_tasks": len(train),
        "validation_tasks": len(val),
    }


def _policy(spec: str, space: str, seed: int, env: Any, inputs: Mapping[str, UnitResult]) -> Any:
    from cm_gym.agents.baselines import Oracle
    from cm_gym.studies.mechanisms.countermem import load_policy

    if spec == "oracle":
        return Oracle(env, action_space=space)
    if spec == "selector":
        return load_policy(str(inputs["selector"].path("checkpoint")), seed, space)
    return load_policy(spec, seed, space)


@unit_kind("policy_eval")
def policy_eval_unit(p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """One frozen run of ``policy`` in ``action_space`` on the store's snapshot; every episode's
    counters plus ``pair_uses`` and ``use_log`` ([record ids, score, draft score] per use)."""
    from cm_gym.envs.metrics import EpisodeCounters
    from cm_gym.envs.selection import MemorySelectionEnv
    from cm_gym.memory.snapshot import FrozenStore

    ctx = context(p)
    tasks = policy_tasks(p, inputs)
    space = str(p["action_space"])
    env = MemorySelectionEnv(
        benchmark=p["benchmark"],
        store=FrozenStore.open(snapshot_path(inputs["store"])),
        tasks=tasks,
        llm=ctx.llm,
        agent=ctx.agent_kind,
        max_decisions=ctx.max_decisions,
        task_order="sequential",
        action_space=space,
    )
    policy = _policy(str(p["policy"]), space, int(p.get("seed", 0)), env, inputs)
    episodes = []
    try:
        for i, task in enumerate(tasks):
            obs, info = env.reset(seed=i, options={"task_id": task.task_id})
            counters, pairs, log, done = EpisodeCounters(task_id=task.task_id), 0, [], False
            while not done:
                action, _ = policy.predict(obs, deterministic=True)
                obs, reward, terminated, truncated, info = env.step(int(np.asarray(action).reshape(-1)[0]))
                counters.update(info, float(reward))
                pairs += int(bool(info.get("pair_use")))
                if info.get("record_id") is not None:
                    log.append([info["record_id"], info["score"], info.get("draft_score")])
                done = terminated or truncated
            episodes.append({**counters.as_dict(), "pair_uses": pairs, "use_log": log})
    finally:
        env.close()
    return {"episodes": episodes, "describe": {"policy": p["policy"], "action_space": space}}
