"""The run's figures (issue 36 item 3): every policy under its full label (both CF Memory rows
distinct), paired differences with their CIs and a zero line, one learning-curve panel per
observation layout with the baselines as reference lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from cm_gym.protocol import figures, report  # noqa: E402
from cm_gym.protocol.figures import (  # noqa: E402
    baseline_returns,
    learning_curve_figure,
    score_figure,
    tokens_figure,
    write_plots,
)

LABELS = {
    "none": "None (always skip)",
    "top1": "Top-1 (always use)",
    "random": "Random valid",
    "cf_memory": "CF Memory (masked DQN)",
    "cf_memory_extended": "CF Memory (masked DQN, extended z_t)",
}


def _metric(values: list[float]) -> dict[str, Any]:
    mean = sum(values) / len(values)
    return {"mean": mean, "std": 0.5, "n": len(values), "per_seed": values}


def _ci(diff: float) -> dict[str, Any]:
    return {"diff": diff, "lo": diff - 2.0, "hi": diff + 2.0, "n_tasks": 4, "n_seeds": 2, "level": 0.95}


def _results() -> dict[str, Any]:
    policies = {}
    for i, (key, label) in enumerate(LABELS.items()):
        cis = {f"vs_{b}": _ci(float(i - 2)) for b in ("random", "top1") if b != key}
        policies[key] = {
            "label": label,
            "layout": {"cf_memory": "paper", "cf_memory_extended": "extended"}.get(key),
            "mean": {
                "score": _metric([80.0 + i, 81.0 + i]),
                "total_tokens_m": _metric([0.02 + i / 100, 0.021 + i / 100]),
                "mean_return": _metric([0.4 + i / 10, 0.4 + i / 10]),
            },
            "paired_ci": cis,
            "paired_ci_two_level": cis,
        }
    training = [
        {
            "seed": s,
            "layout": layout,
            "history": [{"step": 100.0 * k, "val_return": 0.3 + k / 10 + s / 50} for k in (1, 2, 3)],
        }  # fmt: skip
        for layout in ("paper", "extended")
        for s in (0, 1)
    ]
    return {
        "config": {"benchmark": "SQL", "seeds": [0, 1]},
        "split": {"eval": 4, "kind": "shuffled"},
        "snapshot": {"records": 10},
        "policies": policies,
        "training": training,
    }


def test_score_figure_shows_every_full_label_and_the_paired_cis() -> None:
    fig = score_figure(_results())
    left, right = fig.axes
    ticks = [t.get_text() for t in left.get_yticklabels()]
    assert ticks == list(LABELS.values())  # full labels, both CF Memory rows distinct
    assert "CF Memory (masked DQN)" in ticks and "CF Memory (masked DQN, extended z_t)" in ticks
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert legend == ["vs Random valid", "vs Top-1"]  # one entry each, not one per row
    assert "two-level" in right.get_xlabel() and "points" in right.get_xlabel()
    assert "SQL" in fig.texts[0].get_text() and "seeds 0, 1" in fig.texts[0].get_text()
    plt.close(fig)


def test_tokens_figure_uses_full_labels() -> None:
    fig = tokens_figure(_results())
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(LABELS.values())
    assert "millions" in fig.axes[0].get_xlabel()
    plt.close(fig)


def test_learning_curve_has_one_panel_per_layout_and_baseline_lines() -> None:
    results = _results()
    fig = learning_curve_figure(results["training"], "SQL", baseline_returns(results))
    assert [ax.get_title() for ax in fig.axes] == ["layout: paper", "layout: extended"]
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(names) == len(set(names))  # the legend lists each seed once, not once per layout
    assert {"seed 0", "seed 1", "Random valid (held-out tasks)", "Top-1 (held-out tasks)"} <= set(names)
    assert "held-out" in fig.axes[0].get_ylabel()  # the references are not validation returns
    plt.close(fig)
    paper_only = [t for t in results["training"] if t["layout"] == "paper"]
    fig = learning_curve_figure(paper_only, "SQL")
    assert len(fig.axes) == 1
    plt.close(fig)


def test_the_learning_curve_title_names_the_learner_that_trained() -> None:
    """An RLlib-trained run's curve is not titled "masked DQN": the run's --algo names it, else
    the training records' ``algo`` (RLlib writes it), else the built-in masked DQN."""
    training = _results()["training"]
    cases = [
        (training, None, "SQL: masked DQN learning curves per observation layout"),
        (training, "rllib-ppo", "SQL: masked RLlib PPO learning curves per observation layout"),
        ([{**t, "algo": "rllib-dqn"} for t in training], None, "SQL: masked RLlib DQN learning curves"),
    ]
    for records, algo, title in cases:
        fig = learning_curve_figure(records, "SQL", algo=algo)
        assert fig.texts[0].get_text().startswith(title)
        plt.close(fig)


def test_write_plots_titles_the_curve_with_the_runs_algo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def save(fig: Any, path: Path) -> Path:  # read each figure's title instead of writing it
        seen.append(" ".join(t.get_text() for t in fig.texts))  # the suptitle, where there is one
        plt.close(fig)
        return path

    monkeypatch.setattr(figures, "_save", save)
    results = _results()
    results["config"]["algo"] = "rllib-ppo"
    write_plots(results, tmp_path)
    assert "masked RLlib PPO learning curves" in seen[-1] and "DQN" not in seen[-1]


def test_write_plots_writes_the_three_files_and_stays_importable_from_report(tmp_path: Path) -> None:
    assert report.write_plots is write_plots
    paths = report.write_plots(_results(), tmp_path)
    assert [p.name for p in paths] == ["score.png", "tokens.png", "learning_curve.png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_every_image_the_docs_show_exists_and_is_not_empty() -> None:
    import re

    root = Path(__file__).resolve().parents[2]
    shown = [
        (page, target)
        for page in sorted((root / "docs").rglob("*.md"))
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", page.read_text(encoding="utf-8"))
        if not target.startswith(("http://", "https://"))
    ]
    assert any(t.endswith("quick-score.png") for _, t in shown)
    for page, target in shown:
        image = page.parent / target
        assert image.is_file() and image.stat().st_size > 1000, f"{page.relative_to(root)} shows {target}"
