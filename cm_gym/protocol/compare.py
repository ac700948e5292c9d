"""Every registered memory-use policy on one frozen store and split (issue 34): ``cm-gym compare``.

One protocol run (`run_protocol`) over `COMPARE_POLICIES` — the baselines, the field's learned
selectors (trained on T_train with the store frozen), the masked DQN and the oracle — with the
benchmark's default snapshot unless a store is given, so every policy meets the same records and
the same held-out tasks. The results carry, per policy, the two-level paired CIs against Random
and Top-1 (`cm_gym.envs.metrics.two_level_comparisons`, already in every protocol run) and, added
here under ``results["comparison"]``, the two-level bootstrap CI of the score itself (seeds and
tasks resampled, `two_level_bootstrap_means`) and a verdict against each baseline (``better`` /
``worse`` when the 95% CI of the paired difference excludes 0, else ``no difference``).
`comparison_plot` draws both: score with its CI per policy, and the difference from Top-1.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.protocol.config import LEARNED_POLICIES, ProtocolConfig, jsonable
from cm_gym.protocol.run import run_protocol

logger = logging.getLogger(__name__)

#: what ``cm-gym compare`` runs unless --policies says otherwise, in table order
COMPARE_POLICIES: tuple[str, ...] = ("none", "top1", "random", *LEARNED_POLICIES, "cf_memory", "oracle")
#: resamples of the score CIs (as `two_level_paired_bootstrap`'s default)
N_BOOT = 5000


def score_interval(
    per_task_scores: Mapping[Any, Mapping[str, float]], *, n_boot: int = N_BOOT, seed: int = 0
) -> dict[str, Any]:
    """Mean score and its 95% two-level bootstrap CI from ``{seed: {task: score}}`` (the tasks
    every seed ran)."""
    from cm_gym.envs.bootstrap import two_level_bootstrap_means

    seeds = list(per_task_scores)
    tasks = sorted(set.intersection(*(set(per_task_scores[s]) for s in seeds))) if seeds else []
    if not tasks:
        return {"mean": None, "lo": None, "hi": None, "seeds": len(seeds), "tasks": 0}
    matrix = np.array([[float(per_task_scores[s][t]) for t in tasks] for s in seeds])
    means = two_level_bootstrap_means(matrix, n_boot, seed)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "mean": float(matrix.mean()),
        "lo": float(lo),
        "hi": float(hi),
        "seeds": len(seeds),
        "tasks": len(tasks),
    }


def verdict(ci: Mapping[str, Any] | None) -> str | None:
    """``better`` / ``worse`` when the CI of the difference excludes 0, else ``no difference``."""
    if not ci or ci.get("lo") is None:
        return None
    if ci["lo"] > 0:
        return "better"
    if ci["hi"] < 0:
        return "worse"
    return "no difference"


def comparison(results: Mapping[str, Any]) -> dict[str, Any]:
    """Per policy: the score CI and the verdicts against Random and Top-1 (two-level CIs)."""
    out: dict[str, Any] = {}
    for name, res in results["policies"].items():
        two_level = res.get("paired_ci_two_level", {})
        out[name] = {
            "label": res["label"],
            "score": score_interval(res.get("per_task_scores", {})),
            **{f"vs_{b}": {**two_level.get(f"vs_{b}", {}), "verdict": verdict(two_level.get(f"vs_{b}"))}
               for b in ("random", "top1")},
        }  # fmt: skip
    return out


def verdict_lines(results: Mapping[str, Any]) -> list[str]:
    """One line per policy: its score CI and where it beats or loses to Random / Top-1."""
    lines = ["", "Which policy wins (two-level 95% CIs; seeds and tasks resampled):"]
    for row in results["comparison"].values():
        s = row["score"]
        if s["mean"] is None:
            continue
        parts = []
        for base, label in (("random", "Random"), ("top1", "Top-1")):
            c = row[f"vs_{base}"]
            if c.get("verdict"):
                word = {"better": "better than", "worse": "worse than"}.get(c["verdict"], "no different from")
                parts.append(f"{word} {label} ({c['diff']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}])")
        tail = "; ".join(parts) if parts else "(a baseline)"
        lines.append(f"  {row['label']}: {s['mean']:.1f} [{s['lo']:.1f}, {s['hi']:.1f}] — {tail}")
    return lines


def comparison_plot(results: Mapping[str, Any], path: Path) -> Path:
    """Two panels: each policy's score with its two-level 95% CI, and its paired difference from
    Top-1 with that CI (0 marked)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results["comparison"].values() if r["score"]["mean"] is not None]
    labels = [r["label"].split(" (")[0] for r in rows]
    ys = np.arange(len(rows))[::-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.45 * len(rows) + 1.6), sharey=True)
    for y, r in zip(ys, rows, strict=True):
        s = r["score"]
        left.errorbar(
            s["mean"],
            y,
            xerr=[[s["mean"] - s["lo"]], [s["hi"] - s["mean"]]],
            fmt="o",
            capsize=4,
            color="#4c72b0",
        )
        left.annotate(
            f"{s['mean']:.1f}", (s["hi"], y), xytext=(4, -3), textcoords="offset points", fontsize=8
        )
        c = r["vs_top1"]
        if c.get("diff") is not None:
            color = {"better": "#2a9d4b", "worse": "#c0392b"}.get(c["verdict"], "#555555")
            right.errorbar(
                c["diff"],
                y,
                xerr=[[c["diff"] - c["lo"]], [c["hi"] - c["diff"]]],
                fmt="o",
                capsize=4,
                color=color,
            )
    lo, hi = left.get_xlim()
    left.set_xlim(lo, hi + 0.08 * (hi - lo))  # room for the value labels
    right.axvline(0.0, color="black", lw=0.8)
    left.set_yticks(ys, labels)
    left.set_xlabel("score (0–100), 95% CI")
    right.set_xlabel("score − Top-1, paired, 95% CI")
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    cfg = results.get("config", {})
    fig.suptitle(
        f"{cfg.get('benchmark')}: every policy on one frozen store "
        f"({len(cfg.get('seeds', ()))} seed(s) × {results.get('split', {}).get('eval')} tasks; two-level bootstrap)",
        fontsize=10,
    )  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_comparison(
    cfg: ProtocolConfig, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, Any]:
    """`run_protocol` on the default snapshot (unless `cfg.store` is given), then the comparison
    and ``comparison.png``; ``results.json`` in `cfg.out_dir` holds all of it."""
    if cfg.store is None:
        from cm_gym.memory.defaults import default_snapshot

        cfg.store = Path(default_snapshot(cfg.benchmark, data=cfg.data))
    results = run_protocol(cfg, progress)
    results["comparison"] = comparison(results)
    out = Path(cfg.out_dir)
    results["plots"] = [str(comparison_plot(results, out / "comparison.png"))]
    (out / "results.json").write_text(json.dumps(jsonable(results), indent=2))
    return results
