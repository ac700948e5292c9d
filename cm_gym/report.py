"""The main job's outputs: one results table (text) and plots of score and tokens per policy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

COLUMNS = (
    ("Score", "score", "{:.1f}"),
    ("Tokens (M)", "total_tokens_m", "{:.3f}"),
    ("Calls/solved", "evaluator_calls_per_solved", "{:.2f}"),
    ("Fails/solved", "failures_per_solved", "{:.2f}"),
    ("Coverage", "retrieval_coverage", "{:.1%}"),
    ("Harmful use", "harmful_use", "{:.1%}"),
    ("Worse than draft", "worse_than_draft", "{:.1%}"),
)


def _cell(metric: Mapping[str, Any], fmt: str, show_std: bool) -> str:
    mean, std = metric.get("mean"), metric.get("std")
    if mean is None:
        return "—"
    text = fmt.format(mean)
    if show_std and std:
        text += " ± " + fmt.format(std).rstrip("%")
    return text


def results_table(results: Mapping[str, Any]) -> str:
    """Mean ± std over seeds of each SPEC §8 metric, one row per policy. Rates keep their own
    denominators: calls and failures per solved task, coverage per retrieval opportunity, harmful
    use per selected record use."""
    policies = results["policies"]
    header = ["Policy"] + [c[0] for c in COLUMNS]
    rows = [header]
    for res in policies.values():
        mean = res["mean"]
        rows.append([res["label"]] + [_cell(mean[key], fmt, show_std=True) for _, key, fmt in COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    split = results.get("split", {})
    foot = (
        f"benchmark {results['config']['benchmark']}: {split.get('eval', '?')} held-out tasks, "
        f"{len(results['config']['seeds'])} selector seeds, store of {results['snapshot']['records']} records; "
        "score = 100 x mean final U; coverage per retrieval opportunity; harmful use (reuse label -1, "
        "Appendix B.3) per selected record use; worse than draft per selected use that changed the draft."
    )
    return "\n".join(lines + ["", foot])


def write_plots(results: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Bar charts of score and of total tokens per policy (mean ± std over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = results["policies"]
    labels = [res["label"].split(" (")[0] for res in policies.values()]
    paths = []
    for key, title, fname in (
        ("score", "Score (0–100)", "score.png"),
        ("total_tokens_m", "Task-run tokens (M)", "tokens.png"),
    ):
        means = [res["mean"][key]["mean"] or 0.0 for res in policies.values()]
        stds = [res["mean"][key]["std"] or 0.0 for res in policies.values()]
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.bar(labels, means, yerr=stds, capsize=4, color="#4c72b0")
        ax.set_title(f"{results['config']['benchmark']}: {title}")
        ax.tick_params(axis="x", labelrotation=15)
        fig.tight_layout()
        path = Path(out_dir) / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
