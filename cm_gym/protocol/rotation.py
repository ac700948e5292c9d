"""Split rotation: the whole protocol once per split seed, the results pooled.

With a benchmark split by environment (SpiderSQL: by database), one split seed puts a handful of
databases into T_eval, and every number rests on them. ``cm-gym run --split-seeds 0 1 2`` (or
``ProtocolConfig(split_seeds=(0, 1, 2))``) runs build → freeze → train → evaluate for each split
seed into ``<out-dir>/split-<seed>/`` (each with its own results.json) and writes the pooled
``<out-dir>/results.json``:

* each policy's metrics per selector seed pooled exactly over the splits (`pool_summaries`:
  the union of the held-out tasks of all splits, each task counted once per split it is held out
  in), then mean ± std over seeds as always;
* ``per_task_scores`` keyed ``"split<s>/<task id>"``, and both paired CIs (over tasks, seeds
  averaged; over seeds and tasks) computed on that pooled set of (split, task) units;
* ``rotation``: the split seeds, each split's sizes, held-out environments, score per policy and
  results file — the record of which databases were evaluated.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from cm_gym.protocol.config import CI_BASELINES, ProtocolConfig, config_json, jsonable

logger = logging.getLogger(__name__)


def run_rotated(
    cfg: ProtocolConfig,
    progress: Callable[[str, int, int], None] | None = None,
    *,
    run_protocol: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """`run_protocol` (`cm_gym.protocol.run`'s, which calls this) once per seed of
    `cfg.split_seeds`, then `pool_results`, written to ``<out_dir>/results.json``."""
    from cm_gym.protocol.stores import prepare

    cfg.validate()
    out = Path(cfg.out_dir)
    parts: dict[int, dict[str, Any]] = {}
    envs: dict[int, list[str]] = {}
    for i, seed in enumerate(cfg.split_seeds):
        logger.info("split rotation %d/%d: split seed %d", i + 1, len(cfg.split_seeds), seed)
        sub = replace(cfg, split_seed=seed, split_seeds=(), out_dir=out / f"split-{seed}")
        prepared = prepare(sub)
        envs[seed] = sorted({prepared.tasks[t].env_id for t in prepared.split.eval})
        parts[seed] = run_protocol(sub, progress)
    results = pool_results(cfg, parts, envs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(jsonable(results), indent=2))
    return results


def pool_results(
    cfg: ProtocolConfig, parts: Mapping[int, Mapping[str, Any]], envs: Mapping[int, list[str]] | None = None
) -> dict[str, Any]:
    """The pooled results of one run per split seed (see the module doc); `envs`: each split's
    held-out environments, recorded."""
    from cm_gym.envs.metrics import (
        aggregate_seeds,
        paired_bootstrap,
        pool_summaries,
        seed_averaged,
        two_level_comparisons,
    )

    splits = list(parts)
    first = parts[splits[0]]
    keys = [k for k in first["policies"] if all(k in p["policies"] for p in parts.values())]
    policies: dict[str, Any] = {}
    scores_of: dict[str, dict[int, dict[str, float]]] = {}
    for key in keys:
        runs = [parts[s]["policies"][key] for s in splits]
        n_seeds = min(len(r["per_seed"]) for r in runs)
        per_seed = [pool_summaries([r["per_seed"][i] for r in runs]) for i in range(n_seeds)]
        scores: dict[int, dict[str, float]] = {}
        for s, r in zip(splits, runs, strict=True):
            for seed, tasks in (r.get("per_task_scores") or {}).items():
                scores.setdefault(int(seed), {}).update({f"split{s}/{t}": v for t, v in tasks.items()})
        scores_of[key] = scores
        policies[key] = {
            "label": first["policies"][key]["label"],
            "layout": first["policies"][key].get("layout"),
            "per_seed": per_seed,
            "mean": aggregate_seeds(per_seed),
            "masked_actions": sum(int(r.get("masked_actions") or 0) for r in runs),
            "per_task_scores": scores,
            "per_split": {s: r["mean"]["score"]["mean"] for s, r in zip(splits, runs, strict=True)},
        }
    averaged = {k: seed_averaged(v) for k, v in scores_of.items()}
    for key in keys:
        policies[key]["paired_ci"] = {
            f"vs_{b}": paired_bootstrap(averaged[key], averaged[b])
            for b in CI_BASELINES
            if b in averaged and b != key
        }
    for key, comparisons in two_level_comparisons(scores_of, CI_BASELINES).items():
        policies[key]["paired_ci_two_level"] = comparisons
    sides = ("build", "train", "validation", "eval")
    sizes: dict[str, Any] = {
        name: sum(int(p["split"][name]) for p in parts.values()) for name in sides if name in first["split"]
    }
    for name in ("kind", "label"):  # the split's kind is the same for every split seed
        if name in first["split"]:
            sizes[name] = first["split"][name]
    return {
        "config": config_json(cfg),
        "rotation": {
            "split_seeds": splits,
            "splits": {
                s: {
                    "split": p["split"],
                    "eval_envs": list((envs or {}).get(s, [])),
                    "records": p["snapshot"]["records"],
                    "results": str(Path(cfg.out_dir) / f"split-{s}" / "results.json"),
                }
                for s, p in parts.items()
            },
            "pooled": "per selector seed over the union of the splits' held-out tasks; CIs over (split, task)",
        },
        "split": sizes,
        "snapshot": {
            "records": sum(int(p["snapshot"]["records"]) for p in parts.values()),
            "path": [p["snapshot"]["path"] for p in parts.values()],
        },  # fmt: skip
        "training": [dict(t, split_seed=s) for s, p in parts.items() for t in p.get("training", [])],
        "policies": policies,
        "timings": {
            k: sum(float(p.get("timings", {}).get(k, 0.0)) for p in parts.values())
            for k in first.get("timings", {})
        },  # fmt: skip
        "llm": {s: p.get("llm", {}) for s, p in parts.items()},
        "provenance": {s: p.get("provenance") for s, p in parts.items()},
    }
