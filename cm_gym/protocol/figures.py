"""The main job's figures, drawn from results.json (issue 36: figures people read instead of tables).

- ``score.png``: one row per policy under its full label. Left, the held-out score (dot: mean over
  seeds; small dots: each seed). Right, the paired score difference against Random valid and
  against Top-1 with its two-level 95% bootstrap CI (seeds and tasks resampled; the one-level CI
  where results carry no other) and a zero line: the comparison the text argues from.
- ``tokens.png``: task-run tokens per policy, full labels, mean and each seed.
- ``learning_curve.png`` (titled with the learner: masked DQN or RLlib's): one panel per observation layout (never averaged together), validation
  return against training decisions, each seed thin, their mean bold, and the baselines' mean
  return as reference lines. Training records carry no baseline validation return, so the lines
  are the baselines' mean return on the held-out tasks, and the figure says so.

Each ``*_figure`` function returns the matplotlib Figure (tests read its labels); `write_plots`
saves and closes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cm_gym.protocol.config import learner_label

#: (results key, label used in legends) of the baselines drawn as reference lines, in order
REFERENCES = (("random", "Random valid"), ("top1", "Top-1"), ("none", "None"))
_REF_STYLE = {"random": ("#c44e52", "--"), "top1": ("#55a868", "-."), "none": ("#8c8c8c", ":")}
#: the paired comparisons drawn in score.png's right panel: key in ``paired_ci*``, legend, colour, y offset
_VERSUS = (("vs_random", "vs Random valid", "#c44e52", -0.13), ("vs_top1", "vs Top-1", "#55a868", 0.13))
DPI = 110


def _labels(results: Mapping[str, Any]) -> list[str]:
    return [str(res["label"]) for res in results["policies"].values()]


def _title(results: Mapping[str, Any], what: str) -> str:
    cfg, split = results.get("config", {}), results.get("split", {})
    seeds = list(cfg.get("seeds", ()))
    kind = split.get("kind") or split.get("label") or "?"
    return (
        f"{cfg.get('benchmark', '?')}: {what} — {split.get('eval', '?')} held-out tasks "
        f"(split: {kind}), selector seeds {', '.join(map(str, seeds)) or '?'}"
    )


def _per_seed(metric: Mapping[str, Any] | None) -> list[float]:
    return [float(v) for v in (metric or {}).get("per_seed", ()) if v is not None]


def _dot_rows(ax: Any, results: Mapping[str, Any], key: str) -> None:
    """Mean over seeds (dot) and each seed (small dots) per policy, one row each, first on top."""
    labels = _labels(results)
    ys = list(range(len(labels)))
    for y, res in zip(ys, results["policies"].values(), strict=True):
        metric = res["mean"].get(key) or {}
        seeds = _per_seed(metric)
        if seeds:
            ax.plot(seeds, [y] * len(seeds), "o", ms=4, color="#4c72b0", alpha=0.35, mec="none")
        if metric.get("mean") is not None:
            ax.plot([metric["mean"]], [y], "o", ms=8, color="#4c72b0")
    ax.set_yticks(ys, labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)


def _ci_kind(results: Mapping[str, Any]) -> tuple[str, str]:
    if any("paired_ci_two_level" in res for res in results["policies"].values()):
        return "paired_ci_two_level", "two-level bootstrap\n(seeds and tasks resampled)"
    return "paired_ci", "bootstrap over tasks\n(seeds averaged per task)"


def score_figure(results: Mapping[str, Any]) -> Any:
    """Score per policy (left) and its paired difference vs Random valid and vs Top-1 with 95%
    CIs (right), every policy under its full label."""
    import matplotlib.pyplot as plt

    labels = _labels(results)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 1.2 + 0.5 * len(labels)), sharey=True, gridspec_kw={"width_ratios": [1, 1.3]}
    )
    _dot_rows(left, results, "score")
    left.set_xlabel(
        "held-out score (0–100 = 100 × mean final U per task)\nbig dot: mean over seeds; small: each seed",
        fontsize=9,
    )
    key, kind = _ci_kind(results)
    for y, res in enumerate(results["policies"].values()):
        for versus, legend, colour, dy in _VERSUS:
            ci = (res.get(key) or {}).get(versus) or {}
            if ci.get("diff") is None:
                continue
            err = [[ci["diff"] - ci["lo"]], [ci["hi"] - ci["diff"]]]
            right.errorbar([ci["diff"]], [y + dy], xerr=err, fmt="o", ms=5, capsize=3, color=colour,
                           label=legend)  # fmt: skip
    right.axvline(0.0, color="black", lw=1)
    right.grid(axis="x", alpha=0.3)
    handles, names = right.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    if unique:
        right.legend(unique.values(), unique.keys(), fontsize=8, loc="best")
    right.set_xlabel(f"paired score difference (points), 95% CI:\n{kind}", fontsize=9)
    right.tick_params(axis="y", labelleft=False)
    fig.suptitle(_title(results, "score and paired differences"), fontsize=10)
    fig.tight_layout()
    return fig


def tokens_figure(results: Mapping[str, Any]) -> Any:
    """Task-run tokens (millions) per policy under its full label: mean and each seed."""
    import matplotlib.pyplot as plt

    labels = _labels(results)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * len(labels)))
    _dot_rows(ax, results, "total_tokens_m")
    ax.set_xlabel(
        "task-run tokens on the held-out tasks (millions)\nbig dot: mean over seeds; small: each seed"
    )
    ax.set_title(_title(results, "tokens"), fontsize=10)
    fig.tight_layout()
    return fig


def _layouts(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    seen = list(dict.fromkeys(str(t.get("layout") or "paper") for t in runs))
    order = {"paper": 0, "extended": 1}
    return sorted(seen, key=lambda layout: (order.get(layout, 2), seen.index(layout)))


def baseline_returns(results: Mapping[str, Any] | None) -> dict[str, float]:
    """The baselines' mean episode return on the held-out tasks (results carry no validation
    return for them): ``{key: value}`` for those in `REFERENCES` that were run."""
    out: dict[str, float] = {}
    for key, _ in REFERENCES:
        metric = (((results or {}).get("policies") or {}).get(key) or {}).get("mean", {}).get("mean_return")
        if metric and metric.get("mean") is not None:
            out[key] = float(metric["mean"])
    return out


def learner_of(training: Sequence[Mapping[str, Any]], algo: str | None = None) -> str:
    """The learner that trained the selectors, as figures name it: `algo` (the run's ``--algo``)
    when known, else the one the training records name (RLlib's carry ``algo``; the built-in
    masked DQN's carry none)."""
    named = {str(t["algo"]) for t in training if t.get("algo")}
    if algo is None and len(named) == 1:
        algo = named.pop()
    return learner_label(algo or "masked-dqn")


def learning_curve_figure(
    training: Sequence[Mapping[str, Any]],
    benchmark: str,
    baselines: Mapping[str, float] | None = None,
    algo: str | None = None,
) -> Any:
    """Validation return against training decisions, one panel per observation layout: each seed
    thin, their mean bold, `baselines` (``{key: mean return}``) as horizontal lines; the title names
    the learner (`learner_of`). None when no record has a history."""
    import matplotlib.pyplot as plt
    import numpy as np

    runs = [t for t in training if t.get("history")]
    if not runs:
        return None
    layouts = _layouts(runs)
    fig, axes = plt.subplots(
        1, len(layouts), figsize=(5.2 * len(layouts) + 1, 4.2), sharey=True, squeeze=False
    )
    seeds = sorted({int(t["seed"]) for t in runs})
    colours = plt.get_cmap("tab10")
    legend: dict[str, Any] = {}
    for ax, layout in zip(axes[0], layouts, strict=True):
        mine = [t for t in runs if str(t.get("layout") or "paper") == layout]
        by_step: dict[float, list[float]] = {}
        for t in mine:
            steps = [h["step"] for h in t["history"]]
            vals = [h["val_return"] for h in t["history"]]
            (line,) = ax.plot(
                steps, vals, "o-", lw=1, ms=3, alpha=0.5, color=colours(seeds.index(int(t["seed"])) % 10)
            )
            legend.setdefault(f"seed {t['seed']}", line)
            for s, v in zip(steps, vals, strict=True):
                by_step.setdefault(s, []).append(v)
        steps = sorted(s for s, v in by_step.items() if len(v) == len(mine))
        if steps:
            mean = [float(np.mean(by_step[s])) for s in steps]
            (line,) = ax.plot(steps, mean, "-", lw=2.8, color="black")
            legend.setdefault(f"mean over {len(mine)} seed(s)", line)
        for key, name in REFERENCES:
            if key in (baselines or {}):
                colour, style = _REF_STYLE[key]
                ref = ax.axhline(baselines[key], color=colour, ls=style, lw=1.4)  # type: ignore[index]
                legend.setdefault(f"{name} (held-out tasks)", ref)
        ax.set_title(f"layout: {layout}", fontsize=9)
        ax.set_xlabel("training decisions")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(
        "mean return per task\n(lines: selector on validation tasks;\nreferences: baselines on held-out tasks)"
    )
    fig.legend(legend.values(), legend.keys(), fontsize=8, loc="lower center", ncol=min(len(legend), 5))
    fig.suptitle(f"{benchmark}: {learner_of(runs, algo)} learning curves per observation layout", fontsize=10)
    fig.tight_layout(rect=(0, 0.08 + 0.05 * (len(legend) > 5), 1, 1))
    return fig


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def learning_curve(
    training: Sequence[Mapping[str, Any]],
    benchmark: str,
    path: Path,
    baselines: Mapping[str, float] | None = None,
    algo: str | None = None,
) -> Path | None:
    """`learning_curve_figure` saved to `path` (None when there is nothing to draw)."""
    fig = learning_curve_figure(training, benchmark, baselines, algo)
    return None if fig is None else _save(fig, path)


def write_plots(
    results: Mapping[str, Any], out_dir: Path, training: Sequence[Mapping[str, Any]] | None = None
) -> list[Path]:
    """``score.png`` and ``tokens.png`` (per policy) and, when selectors were trained (in
    `results["training"]` or `training`), ``learning_curve.png``."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir = Path(out_dir)
    paths = [
        _save(score_figure(results), out_dir / "score.png"),
        _save(tokens_figure(results), out_dir / "tokens.png"),
    ]
    curve = learning_curve(
        training or results.get("training") or [],
        results["config"]["benchmark"],
        out_dir / "learning_curve.png",
        baseline_returns(results),
        results["config"].get("algo"),
    )
    return paths + ([curve] if curve is not None else [])
