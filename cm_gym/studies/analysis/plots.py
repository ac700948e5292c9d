"""The `diagnose` figure: policy scores, per-slot shares of no-op / harmful / helpful uses and the
per-feature AUCs, in one PNG (issue 36: honest axes, full labels).

Every bar starts at 0; labels are horizontal and whole; the scores panel carries the random and
oracle scores as labelled reference lines and each learned policy's ``place`` (0 = random,
1 = oracle), which the subtitle defines. `diagnose_figure` returns the Figure (tests read its
axes); `write_diagnose_plot` saves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the subtitle line that says what the scores panel's ``place`` annotation means
PLACE_SUBTITLE = (
    "place = (score − random) / (oracle − random): 0 = random valid, 1 = oracle, < 0 below random"
)
_SHARES = (("no_op", "no-op (returns the draft)", "#999999"), ("harmful", "harmful (worse than skip)", "#c44e52"),
           ("helpful", "helpful (better than skip)", "#55a868"))  # fmt: skip
DPI = 110


def _legend_below(ax: Any) -> None:
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)


def _finish_bars(ax: Any, labels: list[str], xmax: float, xlabel: str, title: str) -> None:
    """The axes every horizontal-bar panel shares: rows top-down, bars from 0, legend below."""
    ax.set_yticks(list(range(len(labels))), labels)
    ax.set_ylim(max(len(labels), 1) - 0.5, -0.5)
    ax.set_xlim(0, xmax)
    ax.set_xlabel(xlabel)
    _legend_below(ax)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=10)


def _scores_panel(ax: Any, result: dict[str, Any]) -> None:
    from cm_gym.studies.analysis.diagnose import POLICY_NAMES

    scores = result["scores"]
    names = [POLICY_NAMES.get(n, n) for n in scores]
    values = [float(s["score"]) for s in scores.values()]
    ys = list(range(len(names)))
    ax.barh(ys, values, color="#4c72b0", height=0.6)
    places = result.get("place_between_random_and_oracle") or {}
    for y, key, value in zip(ys, scores, values, strict=True):
        text = f"{value:.1f}"
        if places.get(key) is not None:
            text += f"  (place {places[key]:+.2f})"
        inside = value >= 30  # long bars carry their number at their foot, clear of the reference lines
        ax.text(
            1 if inside else value + 1, y, text, va="center", fontsize=8, color="white" if inside else "black"
        )
    for key, label, colour, style in (
        ("random", "random valid", "#c44e52", "--"),
        ("oracle", "oracle", "#55a868", "-."),
    ):
        if key in scores:
            value = float(scores[key]["score"])
            ax.axvline(value, color=colour, ls=style, lw=1.2, label=f"{label} = {value:.1f}")
    _finish_bars(ax, names, 100, "score on T_eval (0–100; bars from 0)", "policies")


def _slot_name(slot: Any) -> str:
    return "all slots" if slot == "all" else f"slot {slot}"


def _slots_panel(ax: Any, rows: list[dict[str, Any]]) -> None:
    labels = [f"{_slot_name(r['slot'])} ({r['uses']} uses)" for r in rows]
    height = 0.26
    for k, (key, legend, colour) in enumerate(_SHARES):
        ax.barh([y + (k - 1) * height for y in range(len(rows))], [100 * float(r[key]) for r in rows],
                height, label=legend, color=colour)  # fmt: skip
    _finish_bars(
        ax, labels, 100, "% of uses of the slot (bars from 0)", "what a use does, vs skip (train + held-out)"
    )


def _auc_panel(ax: Any, feature_auc: dict[str, float | None]) -> None:
    aucs = {k: float(v) for k, v in feature_auc.items() if v is not None}
    ys = list(range(len(aucs)))
    ax.barh(ys, list(aucs.values()), color="#8172b2", height=0.6)
    ax.axvline(0.5, color="black", lw=1, ls="--", label="0.5 = no signal")
    if not aucs:
        ax.text(0.5, 0.0, "no AUC: every use had the same outcome", ha="center", va="center", fontsize=8)
    _finish_bars(ax, list(aucs), 1, "AUC: using the slot beats skip (bars from 0)", "slot features")


def diagnose_figure(result: dict[str, Any]) -> Any:
    """Three panels side by side, horizontal bars from 0 under full labels; returns the Figure."""
    import matplotlib.pyplot as plt

    rows = result["slots"]
    n = max(len(result["scores"]), len(rows) * 1.5, len(result["feature_auc"]))
    fig, axes = plt.subplots(
        1, 3, figsize=(16, 2.2 + 0.42 * n), layout="constrained", gridspec_kw={"width_ratios": [1.2, 1, 1]}
    )
    _scores_panel(axes[0], result)
    _slots_panel(axes[1], rows)
    _auc_panel(axes[2], result["feature_auc"])
    cfg, split = result["config"], result.get("split", {})
    fig.suptitle(
        f"cm-gym diagnose {cfg['benchmark']}: {split.get('eval', '?')} held-out tasks, "
        f"{result.get('records', '?')} records, selector seeds {list(cfg.get('seeds', ()))}\n"
        f"{PLACE_SUBTITLE}",
        fontsize=10,
    )
    return fig


def write_diagnose_plot(result: dict[str, Any], out_dir: Path) -> Path:
    """`diagnose_figure` saved as ``diagnose.png`` in `out_dir`; returns the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = diagnose_figure(result)
    path = Path(out_dir) / "diagnose.png"
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
