"""The `diagnose` figure: policy scores, per-slot shares of no-op / harmful / helpful uses and the
per-feature AUCs, in one PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_diagnose_plot(result: dict[str, Any], out_dir: Path) -> Path:
    """Three panels side by side; returns the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cm_gym.studies.analysis.diagnose import POLICY_NAMES

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    scores = result["scores"]
    names = [POLICY_NAMES.get(n, n) for n in scores]
    ax = axes[0]
    ax.bar(names, [s["score"] for s in scores.values()], color="#4c72b0")
    ax.set_ylabel("score on T_eval (0-100)")
    lo = min(s["score"] for s in scores.values())
    ax.set_ylim(max(0.0, lo - 10), 100)
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_title("policies")

    ax = axes[1]
    rows = result["slots"]
    labels = [str(r["slot"]) for r in rows]
    width = 0.27
    xs = range(len(rows))
    for k, (key, colour) in enumerate((("no_op", "#999999"), ("harmful", "#c44e52"), ("helpful", "#55a868"))):
        ax.bar(
            [x + (k - 1) * width for x in xs], [100 * r[key] for r in rows], width, label=key, color=colour
        )
    ax.set_xticks(list(xs), labels)
    ax.set_xlabel("slot")
    ax.set_ylabel("% of uses")
    ax.legend(fontsize=8)
    ax.set_title("what a use does (vs skip)")

    ax = axes[2]
    aucs = {k: v for k, v in result["feature_auc"].items() if v is not None}
    ax.barh(list(aucs), list(aucs.values()), color="#8172b2")
    ax.axvline(0.5, color="black", lw=0.8, ls="--")
    ax.set_xlim(0, 1)
    ax.set_xlabel("AUC: use beats skip")
    ax.set_title("slot features")
    fig.suptitle(f"cm-gym diagnose {result['config']['benchmark']}")
    fig.tight_layout()
    path = Path(out_dir) / "diagnose.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
