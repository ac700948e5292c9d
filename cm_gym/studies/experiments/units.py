"""The unit kinds every study is made of (registered with `runner.unit_kind`).

* ``store`` — CounterMem construction (Algorithm 1) on explicit build-task ids, frozen; optional
  checkpoints after given numbers of source tasks; the construction switches (retention rule,
  capacity, ``verify=False`` for CF without WM) are parameters.
* ``selector`` — one masked-DQN seed trained on a store (`cm_gym.protocol.train_selector`, the
  checkpoint chosen on the validation subset).
* ``mechanism`` — a baseline memory mechanism built on build-task ids (`cm_gym.studies.mechanisms`).
* ``evaluate`` — one frozen run of a mechanism (or of CounterMem: store + selector or a fixed
  rule, with a retrieval mode and the condition switch) over explicit task ids; the result holds
  every episode's counters.

Every unit rebuilds what it needs from its parameters (benchmark, data version, LLM spec and
seed, agent, budgets), so units are plain data and run the same in any worker.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core.types import Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import LLM
from cm_gym.studies.experiments.unit import ExperimentError, UnitResult, unit_kind
from cm_gym.studies.mechanisms import CounterMem, MechanismContext, make_mechanism


@lru_cache(maxsize=8)
def benchmark_tasks(benchmark: str) -> dict[str, Task]:
    """The benchmark's tasks by id (loaded once per process)."""
    tasks = get_benchmark(benchmark).load_tasks()
    return {t.task_id: t for t in tasks}


@lru_cache(maxsize=8)
def data_version(benchmark: str) -> str:
    """A hash of the benchmark's task contents (ids, prompts, references, environments), so a
    regenerated or edited benchmark never reuses results."""
    h = hashlib.sha256()
    for task in sorted(benchmark_tasks(benchmark).values(), key=lambda t: t.task_id):
        for part in (task.task_id, task.prompt, task.reference, task.env_id, task.family):
            h.update(part.encode("utf-8", "replace"))
            h.update(b"\x1f")
    return h.hexdigest()[:16]


def tasks_for(p: Mapping[str, Any], key: str, inputs: Mapping[str, UnitResult]) -> list[Task]:
    """The tasks `p[key]` names: from the ``env`` input (a changed environment, `units_change`)
    when the unit has one, else from the benchmark."""
    if "env" not in inputs:
        return tasks_of(p, key)
    from cm_gym.domains.environment import load_environment

    by_id = {t.task_id: t for t in load_environment(inputs["env"].path("env")).tasks}
    missing = [i for i in p[key] if i not in by_id]
    if missing:
        raise ExperimentError(
            f"{len(missing)} task id(s) of {key} are not in the changed environment: {missing[:3]}"
        )
    return [by_id[i] for i in p[key]]


def tasks_of(p: Mapping[str, Any], key: str) -> list[Task]:
    by_id = benchmark_tasks(p["benchmark"])
    missing = [i for i in p[key] if i not in by_id]
    if missing:
        raise ExperimentError(
            f"{len(missing)} task id(s) of {key} are not in benchmark {p['benchmark']}: {missing[:3]}"
        )
    return [by_id[i] for i in p[key]]


@lru_cache(maxsize=32)
def _llm(
    spec: str,
    seed: int,
    benchmark: str,
    cache: str | None,
    mode: str,
    limits: tuple[tuple[str, Any], ...] = (),
) -> LLM:
    """The LLM (`make_llm`): a real endpoint always behind the response cache (`cache` or the
    default file), the simulator only when a cache file is given; `limits` are the client limits
    given (`make_llm` keywords)."""
    from cm_gym.llm.factory import make_llm

    lookup = benchmark_tasks(benchmark) if spec.startswith(("simulated", "recorded")) else None
    return make_llm(spec, seed=seed, task_lookup=lookup, cache_path=cache, cache_mode=mode, **dict(limits))


def _limits(p: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The client limits a unit's parameters give (timeout, max_tokens, retries, concurrency)."""
    names = {"llm_timeout": "timeout", "llm_max_tokens": "max_tokens", "llm_retries": "retries"}
    names["llm_concurrency"] = "concurrency"
    return tuple((names[k], p[k]) for k in sorted(names) if p.get(k) is not None)


def context(p: Mapping[str, Any]) -> MechanismContext:
    """The agent, LLM and evaluator a unit works with; sample i of the LLM uses seed + 1000·i."""
    spec = get_benchmark(p["benchmark"])
    domain = get_domain(spec.domain_name)
    bench, llm, seed = p["benchmark"], p["llm"], int(p["llm_seed"])
    cache, mode, limits = p.get("llm_cache"), p.get("llm_cache_mode", "rw"), _limits(p)
    return MechanismContext(
        domain,
        _llm(llm, seed, bench, cache, mode, limits),
        domain.make_evaluator(**dict(p.get("evaluator") or {})),
        agent_kind=p["agent"],
        max_decisions=int(p["max_decisions"]),
        seed=seed,
        sampler=lambda i: _llm(llm, seed + 1000 * i, bench, cache, mode, limits),
    )


def cost_dict(cost: Cost) -> dict[str, int]:
    return {
        "tokens": cost.tokens,
        "llm_calls": cost.llm_calls,
        "evaluator_calls": cost.evaluator_calls,
        "failures": cost.failures,
    }


@unit_kind("store")
def build_store(p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """CounterMem construction on ``build_ids`` (in that order), frozen to ``snapshot.sqlite``."""
    from cm_gym.memory.construction import ConstructionConfig, build_memory
    from cm_gym.memory.store import RecordStore

    ctx = context(p)
    tasks = tasks_for(p, "build_ids", inputs)
    checkpoints = [int(c) for c in p.get("checkpoints", ())]
    verified: list[list[Any]] = []  # with "log_verified": every contrast the build verified
    if p.get("log_verified"):
        kw_verified: dict[str, Any] = {
            "on_verified": lambda task, a_minus, a_plus, delta: verified.append(
                [task.task_id, a_minus, a_plus]
            )
        }
    else:
        kw_verified = {}
    budget = p.get("token_budget")
    if budget is not None and checkpoints:
        raise ExperimentError("a store unit takes checkpoints or a token budget, not both")
    cfg = ConstructionConfig(**p.get("construction", {}))
    kw = {"agent_kind": ctx.agent_kind, "max_decisions": ctx.max_decisions}
    live = workdir / "store.sqlite"
    summaries = []
    with RecordStore(live, domain=ctx.domain.name, benchmark=p["benchmark"]) as store:
        if budget is None:
            ckpt_dir = workdir / "checkpoints" if checkpoints else None
            summaries.append(
                build_memory(
                    ctx.domain,
                    tasks,
                    store,
                    ctx.llm,
                    ctx.evaluator,
                    cfg,
                    checkpoints=checkpoints,
                    checkpoint_dir=ckpt_dir,
                    **kw,
                    **kw_verified,
                )
            )
        else:  # E.2: process build tasks in order until the construction tokens reach the budget
            for task in tasks:
                if sum(s.solving_tokens + s.verification_tokens for s in summaries) >= int(budget):
                    break
                summaries.append(build_memory(ctx.domain, [task], store, ctx.llm, ctx.evaluator, cfg, **kw))
        store.freeze(workdir / "snapshot.sqlite", overwrite=True)
        records = len(store)
    for side in workdir.glob("store.sqlite*"):
        side.unlink()
    by_count = {
        str(n): f"checkpoints/checkpoint-{n:04d}.sqlite"
        for n in checkpoints
        if (workdir / "checkpoints" / f"checkpoint-{n:04d}.sqlite").is_file()
    }
    if p.get("log_verified"):
        (workdir / "verified.json").write_text(json.dumps(verified), encoding="utf-8")
    data = asdict(summaries[0]) if len(summaries) == 1 else {"tasks": sum(s.tasks for s in summaries)}
    data.pop("admitted_ids", None)
    data.pop("checkpoints", None)
    return {
        "snapshot": "snapshot.sqlite",
        "checkpoints": by_count,
        "records": records,
        "tasks_processed": sum(s.tasks for s in summaries),
        "summary": data,
        "cost": {
            "tokens": sum(s.solving_tokens + s.verification_tokens for s in summaries),
            "llm_calls": sum(s.solving_llm_calls + s.verification_llm_calls for s in summaries),
            "evaluator_calls": sum(s.solving_calls + s.verification_calls for s in summaries),
        },
    }


def snapshot_path(store: UnitResult, which: str = "final") -> Path:
    """The final snapshot of a store unit, or its checkpoint after ``which`` source tasks."""
    if which == "final":
        return store.path("snapshot")
    rel = store["checkpoints"].get(str(which))
    if rel is None:
        raise ExperimentError(
            f"store has no checkpoint after {which} source tasks ({sorted(store['checkpoints'])})"
        )
    return store.directory / rel


def protocol_config(p: Mapping[str, Any], workdir: Path) -> Any:
    """The `ProtocolConfig` of a selector unit's parameters (one seed, no TensorBoard)."""
    from cm_gym.protocol import ProtocolConfig

    return ProtocolConfig(
        benchmark=p["benchmark"],
        out_dir=workdir,
        seeds=(int(p["seed"]),),
        total_decisions=int(p["total_decisions"]),
        checkpoint_every=int(p["checkpoint_every"]),
        agent=p["agent"],
        llm=p["llm"],
        llm_seed=int(p["llm_seed"]),
        max_decisions=int(p["max_decisions"]),
        tensorboard=False,
        progress=False,
        llm_cache=Path(p["llm_cache"]) if p.get("llm_cache") else None,
        llm_cache_mode=p.get("llm_cache_mode", "rw"),
        llm_timeout=p.get("llm_timeout"),
        llm_max_tokens=p.get("llm_max_tokens"),
        llm_retries=p.get("llm_retries"),
        concurrency=p.get("llm_concurrency"),
        env_kwargs={"evaluator_kwargs": dict(p["evaluator"])} if p.get("evaluator") else {},
    )


@unit_kind("selector")
def train_selector_unit(
    p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path
) -> dict[str, Any]:
    """One masked-DQN seed on the store's snapshot (checkpoint chosen on ``validation_ids``)."""
    from cm_gym.core.types import Split
    from cm_gym.protocol import Prepared, load_snapshot, train_selector

    spec = get_benchmark(p["benchmark"])
    split = Split(
        tuple(p["build_ids"]), tuple(p["train_ids"]), tuple(p["validation_ids"]), tuple(p["eval_ids"])
    )
    split.check()
    prepared = Prepared(spec, benchmark_tasks(p["benchmark"]), split)
    cfg = protocol_config(p, workdir)
    snapshot = load_snapshot(snapshot_path(inputs["store"], p.get("snapshot", "final")), prepared)
    record = train_selector(cfg, snapshot, prepared, int(p["seed"]))
    best = Path(record["best_checkpoint"])
    shutil.copyfile(best, workdir / "selector.zip")
    shutil.rmtree(workdir / "selector", ignore_errors=True)
    return {
        "checkpoint": "selector.zip",
        "best_step": record["best_step"],
        "best_validation_return": record["best_validation_return"],
        "history": record["history"],
        "train_seconds": record["train_seconds"],
    }


@unit_kind("mechanism")
def build_mechanism(p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """A baseline mechanism built on ``build_ids``; its state is saved as JSON."""
    mechanism = make_mechanism(p["mechanism"], **p.get("mparams", {}))
    mechanism.build(context(p), tasks_of(p, "build_ids"))
    (workdir / "state.json").write_text(json.dumps(mechanism.state_dict()), encoding="utf-8")
    return {
        "state": "state.json",
        "cost": cost_dict(mechanism.build_cost),
        "info": mechanism.build_info,
        "describe": mechanism.describe(),
    }


@unit_kind("evaluate")
def evaluate_unit(p: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """One frozen run over ``task_ids``: every episode's counters (`episode.run_episodes` keys)."""
    ctx = context(p)
    tasks = tasks_for(p, "task_ids", inputs)
    if p["mechanism"] == "countermem":
        selector = inputs.get("selector")
        mechanism = CounterMem(
            snapshot_path(inputs["store"], p.get("snapshot", "final")),
            str(selector.path("checkpoint")) if selector is not None else p.get("policy", "top1"),
            benchmark=p["benchmark"],
            retrieval=p.get("retrieval", "matched"),
            use_conditions=bool(p.get("use_conditions", True)),
            seed=int(p.get("seed", 0)),
            check_env_versions=bool(p.get("check_env_versions", True)),
            log_uses=bool(p.get("log_uses", False)),
        )
        build = inputs["store"]["cost"]
    else:
        mechanism = make_mechanism(p["mechanism"], **p.get("mparams", {}))
        built = inputs.get("mechanism")
        if built is not None:
            mechanism.load_state_dict(json.loads(built.path("state").read_text(encoding="utf-8")))
        build = built["cost"] if built is not None else cost_dict(Cost())
    episodes = mechanism.run_episodes(ctx, tasks, score_drafts=True)
    return {"episodes": episodes, "build_cost": build, "describe": mechanism.describe()}
