"""The protocol's entry points: the whole run (build → freeze → train → evaluate), training only,
evaluation only; each writes its JSON record into `cfg.out_dir`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cm_gym.llm.replies import delta, reply_counts
from cm_gym.protocol.config import ProtocolConfig, ProtocolError, config_json, jsonable
from cm_gym.protocol.evaluate import (
    EMPTY_STORE_REASON,
    Checkpoints,
    checkpoints_by_layout,
    evaluate_policies,
    store_is_empty,
)
from cm_gym.protocol.provenance import provenance
from cm_gym.protocol.selector import train_layouts
from cm_gym.protocol.stores import (
    Prepared,
    build_snapshot,
    llm_stats,
    load_snapshot,
    make_protocol_llm,
    prepare,
    recorded_summary,
    snapshot_summary,
    split_summary,
)


def _built_or_given(
    cfg: ProtocolConfig, prepared: Prepared, llm: Any, progress: Callable[[str, int, int], None] | None
) -> Path:
    """The snapshot of a run: `cfg.store` when given, else memory built on T_build and frozen."""
    if cfg.store is not None:
        return Path(cfg.store)
    return build_snapshot(
        cfg, prepared, progress=(lambda i, n: progress("build", i, n)) if progress else None, llm=llm
    )


def run_protocol(
    cfg: ProtocolConfig, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """Build (or reuse) and freeze memory, train one selector per seed, evaluate all policies, and
    write ``results.json`` into `cfg.out_dir`. Returns the results dict. On a store that holds no
    record no selector is trained (every policy equals None there): ``training`` is empty,
    ``training_skipped_reason`` says why, and each CF Memory row is always-skip with
    ``untrained_reason``. With `cfg.split_seeds`,
    all of it once per split seed, pooled (`cm_gym.protocol.rotation`)."""
    if cfg.split_seeds:
        from cm_gym.protocol.rotation import run_rotated

        return run_rotated(cfg, progress, run_protocol=run_protocol)
    timings: dict[str, float] = {}
    trains = "cf_memory" in cfg.policies and "cf_memory" not in cfg.custom_policies
    prepared = prepare(cfg, need=_needed(cfg, train=trains, evaluate=True))
    out = Path(cfg.out_dir)  # made only once there is something to run
    out.mkdir(parents=True, exist_ok=True)
    llm = make_protocol_llm(cfg, prepared)
    t0 = time.perf_counter()
    snapshot_path = _built_or_given(cfg, prepared, llm, progress)
    snapshot = load_snapshot(snapshot_path, prepared)
    timings["build_seconds"] = time.perf_counter() - t0
    phases = [("build", reply_counts(llm))]
    training: list[dict[str, Any]] = []
    checkpoints: dict[str, dict[int, str]] = {}
    skipped = trains and store_is_empty(snapshot)
    if skipped:  # nothing to select from: no selector is trained (EMPTY_STORE_REASON)
        checkpoints = {layout: {} for layout in cfg.obs_layouts}
    elif trains:
        training = train_layouts(cfg, snapshot, prepared, llm, progress)
        for record in training:
            checkpoints.setdefault(record["layout"], {})[record["seed"]] = record["best_checkpoint"]
    timings["train_seconds"] = time.perf_counter() - t0 - timings["build_seconds"]
    phases.append(("train", reply_counts(llm)))
    t1 = time.perf_counter()
    policies = evaluate_policies(
        cfg,
        snapshot,
        prepared,
        checkpoints,
        llm,
        (lambda i, n: progress("evaluate", i, n)) if progress else None,
    )
    timings["evaluate_seconds"] = time.perf_counter() - t1
    phases.append(("evaluate", reply_counts(llm)))
    results = {
        "config": config_json(cfg),
        "split": split_summary(cfg, prepared),
        "snapshot": snapshot_summary(snapshot_path, snapshot),
        "training": training,
        "policies": policies,
        "timings": timings,
        "llm": with_replies(llm_stats(llm), llm, phases),
        "provenance": provenance(prepared.split, prepared.tasks),
    }
    if skipped:
        results["training_skipped_reason"] = EMPTY_STORE_REASON
    recorded = recorded_summary(cfg, prepared, llm)
    if recorded is not None:
        results["recorded"] = recorded
    (out / "results.json").write_text(json.dumps(jsonable(results), indent=2))
    return results


def with_replies(
    stats: dict[str, Any], llm: Any, phases: Sequence[tuple[str, dict[str, Any] | None]] = ()
) -> dict[str, Any]:
    """`stats` plus the real vs simulated replies of the run (``replies``; with cumulative
    snapshots taken after each phase, also ``replies_by_phase``), when the LLM marks its replies."""
    total = reply_counts(llm)
    if total is None:
        return stats
    out = {**stats, "replies": total}
    if phases:
        before: dict[str, Any] | None = None
        out["replies_by_phase"] = {}
        for name, snap in phases:
            out["replies_by_phase"][name] = delta(snap, before) if snap else delta(total, total)
            before = snap or before
    return out


def train_all(cfg: ProtocolConfig, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Build (or reuse) and freeze memory, then train one selector per seed; writes
    ``training.json`` (snapshot path, best checkpoint per seed) into `cfg.out_dir`. On a store that
    holds no record nothing is trained, as in `run_protocol`: ``training`` is empty and
    ``training_skipped_reason`` says why (`cm-gym evaluate` then scores CF Memory as always-skip)."""
    _one_split(cfg)
    prepared = prepare(cfg, need=_needed(cfg, train=True, evaluate=False))
    llm = make_protocol_llm(cfg, prepared)
    snapshot_path = _built_or_given(cfg, prepared, llm, progress)
    snapshot = load_snapshot(snapshot_path, prepared)
    skipped = store_is_empty(snapshot)
    training = [] if skipped else train_layouts(cfg, snapshot, prepared, llm, progress)
    record: dict[str, Any] = {
        "config": config_json(cfg),
        "split": split_summary(cfg, prepared),
        "snapshot": str(snapshot_path),
        "training": training,
        "llm": with_replies(llm_stats(llm), llm),
        "provenance": provenance(prepared.split, prepared.tasks),
    }
    if skipped:
        record["training_skipped_reason"] = EMPTY_STORE_REASON
    recorded = recorded_summary(cfg, prepared, llm)
    if recorded is not None:
        record["recorded"] = recorded
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(cfg.out_dir) / "training.json").write_text(json.dumps(jsonable(record), indent=2))
    return record


def evaluate_all(
    cfg: ProtocolConfig,
    checkpoints: Checkpoints,
    *,
    write: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Evaluate every policy on T_eval against the frozen snapshot `cfg.store`; checkpoints
    (``{seed: path}`` for the paper layout or ``{layout: {seed: path}}``) are checked (existence,
    observation layout) before any episode runs. With `write`, the results go to
    ``<out_dir>/results.json``. `progress("evaluate", done, total)` counts policy × seed runs."""
    _one_split(cfg)
    if cfg.store is None:
        raise ProtocolError("evaluation needs a frozen snapshot (--store)")
    prepared = prepare(cfg, need=("eval",))
    snapshot = load_snapshot(Path(cfg.store), prepared)
    trained = "cf_memory" in cfg.policies and "cf_memory" not in cfg.custom_policies
    # a 0-record store that `train_all` trained nothing on: CF Memory is scored as always-skip
    untrained = trained and store_is_empty(snapshot) and not any(checkpoints_by_layout(checkpoints).values())
    if trained and not untrained:
        from cm_gym.agents.masked_dqn import MaskedDQN
        from cm_gym.envs.features import obs_dim

        for layout, paths in (checkpoints_by_layout(checkpoints) or {"paper": {}}).items():
            missing = [s for s in cfg.seeds if s not in paths or not Path(paths[s]).exists()]
            if missing:
                raise ProtocolError(f"no {layout!r}-layout selector checkpoint for seed(s) {missing}")
            for path in paths.values():  # raises on another observation layout
                if Path(path).is_dir():  # a learner plugin's checkpoint (an RLlib module folder)
                    from cm_gym.protocol.learners import load_plugin_checkpoint

                    load_plugin_checkpoint(path)
                else:
                    MaskedDQN.load(path, env=None, device="cpu", expected_obs_dim=obs_dim(layout))
    llm = make_protocol_llm(cfg, prepared)
    policies = evaluate_policies(
        cfg,
        snapshot,
        prepared,
        checkpoints,
        llm,
        (lambda i, n: progress("evaluate", i, n)) if progress else None,
    )
    results = {
        "config": config_json(cfg),
        "split": split_summary(cfg, prepared),
        "snapshot": snapshot_summary(Path(cfg.store), snapshot),
        "policies": policies,
        "llm": with_replies(llm_stats(llm), llm),
        "provenance": provenance(prepared.split, prepared.tasks),
    }
    if untrained:
        results["training_skipped_reason"] = EMPTY_STORE_REASON
    recorded = recorded_summary(cfg, prepared, llm)
    if recorded is not None:
        results["recorded"] = recorded
    if write:
        Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out_dir) / "results.json").write_text(json.dumps(jsonable(results), indent=2))
    return results


def _needed(cfg: ProtocolConfig, *, train: bool, evaluate: bool) -> tuple[str, ...]:
    """The split sides a step works on: build (unless a store is given), train, eval."""
    return (
        *(("build",) if cfg.store is None else ()),
        *(("train",) if train else ()),
        *(("eval",) if evaluate else ()),
    )


def _one_split(cfg: ProtocolConfig) -> None:
    if cfg.split_seeds:
        raise ProtocolError(
            "split rotation (split_seeds) runs the whole protocol: use run_protocol / cm-gym run"
        )
