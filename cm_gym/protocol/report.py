"""The main job's outputs: the results table (text that fits the terminal, wrapping rather than
cutting names — `cm_gym.core.tables`; Markdown or JSON) and
plots — each metric per policy with its spread over seeds, on an axis zoomed to the values (80
vs 93 must not look flat), values labelled — and the selectors' learning curves (validation return
against training decisions, per seed and their mean)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cm_gym.core.tables import natural_width, render, terminal_width

COLUMNS = (
    ("Score", "score", "{:.1f}"),
    ("Score/decision", "decision_score", "{:.1f}"),
    ("Tokens (M)", "total_tokens_m", "{:.3f}"),
    ("Calls/solved", "evaluator_calls_per_solved", "{:.2f}"),
    ("Fails/solved", "failures_per_solved", "{:.2f}"),
    ("Coverage", "retrieval_coverage", "{:.1%}"),
    ("Harmful use", "harmful_use", "{:.1%}"),
    ("Helpful use", "helpful_use", "{:.1%}"),
)
#: The first-decision score, shown beside the (budget) score wherever results carry it: how much
#: of a score the first decision earns and how much the later decisions add.
FIRST_DECISION = ("First decision", "first_decision_score", "{:.1f}")
#: Short headers used when the full ones do not fit the width (explained under the table). None
#: ends in "/s": calls and failures are per solved task, and "Calls/s" reads as calls per second.
SHORT = {
    "Tokens (M)": "Tok(M)",
    "Calls/solved": "Calls/sol",
    "Fails/solved": "Fails/sol",
    "Coverage": "Cover",
    "Harmful use": "Harm",
    "Worse than draft": "Worse",
    "Score/decision": "Sc/dec",
    "First decision": "1st dec",
    "Helpful use": "Help",
}
#: The width of text written where no terminal is (`cm_gym.core.tables.FALLBACK_WIDTH`).
WIDTH = 100
FORMATS = ("text", "markdown", "json")


def _cell(metric: Mapping[str, Any] | None, fmt: str, show_std: bool) -> str:
    mean, std = (metric or {}).get("mean"), (metric or {}).get("std")
    if mean is None:
        return "—"
    text = fmt.format(mean)
    if show_std and std:
        text += " ± " + fmt.format(std).rstrip("%")
    return text


def columns(results: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The table's columns: `COLUMNS`, with the first-decision score beside the score when any
    policy's results carry it (results written before it existed do not)."""
    if any((res.get("mean") or {}).get(FIRST_DECISION[1]) for res in results["policies"].values()):
        return (COLUMNS[0], FIRST_DECISION, *COLUMNS[1:])
    return COLUMNS


def _rows(results: Mapping[str, Any], std: str, short: bool) -> list[list[str]]:
    cols = columns(results)
    header = ["Policy"] + [SHORT.get(c[0], c[0]) if short else c[0] for c in cols]
    rows = [header]
    for res in results["policies"].values():
        label = str(res["label"])
        cells = [
            _cell(res["mean"].get(key), fmt, show_std=std == "all" or (std == "score" and i == 0))
            for i, (_, key, fmt) in enumerate(cols)
        ]
        rows.append([label, *cells])
    return rows


def _footnote(results: Mapping[str, Any]) -> str:
    split = results.get("split", {})
    cfg = results.get("config", {})
    rotation = results.get("rotation")
    pooled = (
        f" pooled over split seeds {', '.join(map(str, rotation['split_seeds']))} (one build, training "
        "and evaluation each; held-out tasks summed);"
        if rotation
        else ""
    )
    kind = f" (split: {split['label']})" if split.get("label") else ""
    return (
        f"benchmark {cfg.get('benchmark', '?')}: {split.get('eval', '?')} held-out tasks{kind},{pooled} "
        f"{len(cfg.get('seeds', ()))} selector seed(s), store of {results['snapshot']['records']} records; "
        "mean ± std over seeds. Score = 100 × mean final U per task (within the decision budget); "
        "first decision = 100 × mean U of each task's first executed action; score/decision = 100 × mean U of "
        "every executed action; calls and fails per solved task; coverage per retrieval opportunity; "
        "harmful / helpful use per selected record use (the revised action scored below / above the "
        "memory-free draft, checked on a fork: SPEC §3 amended)."
    )


def _warnings(results: Mapping[str, Any]) -> list[str]:
    return [
        f"warning: {res['label']} picked a masked action {res['masked_actions']} time(s); they ran as skip."
        for res in results["policies"].values()
        if res.get("masked_actions")
    ]


#: The one line a table of a run on an empty store starts with (instead of identical rows and
#: ``+0.0 [+0.0, +0.0]`` CIs): results.json still holds every policy.
EMPTY_STORE_LINE = "The store holds 0 records: every policy equals None{} (None shown alone)."
SKIPPED_TRAINING = " and no selector was trained"


def _empty_store_line(results: Mapping[str, Any]) -> str:
    return EMPTY_STORE_LINE.format(SKIPPED_TRAINING if results.get("training_skipped_reason") else "")


def _empty_store(results: Mapping[str, Any]) -> bool:
    return (results.get("snapshot") or {}).get("records") == 0


def _none_only(results: Mapping[str, Any]) -> dict[str, Any]:
    """`results` with the None row alone (every row when there is none), without paired CIs."""
    policies = results["policies"]
    kept = {k: v for k, v in policies.items() if k == "none"} or dict(policies)
    drop = {key for key, _ in CI_KINDS}
    return {
        **results,
        "policies": {k: {f: x for f, x in v.items() if f not in drop} for k, v in kept.items()},
    }


def results_table(results: Mapping[str, Any], fmt: str = "text", width: int | None = None) -> str:
    """The results as text (every line ≤ `width`, by default the terminal's width or `WIDTH`
    where there is no terminal), a Markdown table or JSON. Rates keep their own denominators:
    calls and failures per solved task, coverage per retrieval opportunity, harmful use per
    selected record use. To fit, the text drops the std beside every metric but the score, then
    shortens headers (explained under the table), then wraps cells; it never cuts a name."""
    if fmt == "json":
        return json.dumps(results_json(results), indent=2)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    empty = _empty_store(results)
    if empty:
        results = _none_only(results)
    if fmt == "markdown":
        return (_empty_store_line(results) + "\n\n" if empty else "") + markdown_table(results)
    width = terminal_width(WIDTH) if width is None else width
    for std, short in (("all", False), ("score", False), ("score", True)):
        rows = _rows(results, std, short)
        if natural_width(rows) <= width:
            break
    lines = render(rows, width)
    foot = _footnote(results)
    if short:
        foot += (
            " Short headers: "
            + ", ".join(f"{SHORT[c[0]]} = {c[0]}" for c in columns(results) if c[0] in SHORT)
            + "."
        )
    notes = [textwrap.fill(foot, width)] + [textwrap.fill(w, width) for w in _warnings(results)]
    head = [*textwrap.wrap(_empty_store_line(results), width), ""] if empty else []
    return "\n".join([*head, *lines, "", *notes, *ci_table(results, width)])


def _ci(c: Mapping[str, Any] | None) -> str:
    if not c or c.get("diff") is None:
        return "—"
    return f"{c['diff']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}]"


#: the two CI kinds a results table shows: key in a policy's results, heading
CI_KINDS = (
    ("paired_ci", "Score difference, paired over tasks (seeds averaged per task; 95% bootstrap CI):"),
    (
        "paired_ci_two_level",
        "Score difference, paired, seeds and tasks resampled (two-level bootstrap; 95% CI):",
    ),
)


def _ci_rows(results: Mapping[str, Any], key: str = "paired_ci") -> list[list[str]]:
    rows = [["Policy", "vs Random valid", "vs Top-1"]]
    for res in results["policies"].values():
        label = str(res["label"])
        ci = res.get(key, {})
        rows.append([label, _ci(ci.get("vs_random")), _ci(ci.get("vs_top1"))])
    return rows


def ci_table(results: Mapping[str, Any], width: int | None = None) -> list[str]:
    """Paired score differences against random valid and top-1, two ways (SPEC §8): over tasks
    with each policy's seeds averaged per task first (seeds fixed), and over seeds and tasks (the
    two-level bootstrap, where results carry it); 95% percentile bootstrap. Lines ≤ `width` (by
    default the terminal's), names wrapped, never cut."""
    width = terminal_width(WIDTH) if width is None else width
    out: list[str] = []
    for key, heading in CI_KINDS:
        if not any(key in res for res in results["policies"].values()):
            continue
        out += ["", *textwrap.wrap(heading, width), *render(_ci_rows(results, key), width)]
    return out


def markdown_table(results: Mapping[str, Any]) -> str:
    """A GitHub Markdown table (mean ± std everywhere) and its footnote."""
    rows = _rows(results, "all", False)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    for key, heading in CI_KINDS:
        if any(key in res for res in results["policies"].values()):
            ci = _ci_rows(results, key=key)
            if key == "paired_ci":  # the heading markdown tables always had
                heading = "Score difference, paired over tasks (95% bootstrap CI):"
            lines += ["", heading, ""]
            lines += ["| " + " | ".join(ci[0]) + " |", "|" + "---|" * len(ci[0])]
            lines += ["| " + " | ".join(r) + " |" for r in ci[1:]]
    return "\n".join([*lines, "", _footnote(results), *_warnings(results)])


def results_json(results: Mapping[str, Any]) -> dict[str, Any]:
    """The table's content as plain data: one row per policy, each metric's mean and std."""
    rows = []
    for name, res in results["policies"].items():
        row: dict[str, Any] = {"policy": name, "label": res["label"]}
        for header, key, _ in columns(results):
            metric = res["mean"].get(key) or {}
            row[key] = {"mean": metric.get("mean"), "std": metric.get("std"), "header": header}
        row["masked_actions"] = res.get("masked_actions", 0)
        row["paired_ci"] = res.get("paired_ci", {})
        row["paired_ci_two_level"] = res.get("paired_ci_two_level", {})
        rows.append(row)
    return {
        "benchmark": results.get("config", {}).get("benchmark"),
        "seeds": list(results.get("config", {}).get("seeds", ())),
        "eval_tasks": results.get("split", {}).get("eval"),
        "split": results.get("split", {}).get("kind"),
        "store_records": results["snapshot"]["records"],
        "rows": rows,
    }


def _zoomed(ax: Any, lows: Sequence[float], highs: Sequence[float]) -> None:
    """y-limits around the data (not from 0), so small differences are visible."""
    lo, hi = min(lows), max(highs)
    pad = 0.15 * (hi - lo) if hi > lo else max(abs(hi) * 0.05, 0.5)
    ax.set_ylim(lo - pad, hi + pad)


def _metric_plot(results: Mapping[str, Any], key: str, title: str, fmt: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    policies = list(results["policies"].values())
    labels = [res["label"].split(" (")[0] for res in policies]
    means = [res["mean"][key]["mean"] or 0.0 for res in policies]
    stds = [res["mean"][key]["std"] or 0.0 for res in policies]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    xs = range(len(policies))
    ax.errorbar(xs, means, yerr=stds, fmt="o", capsize=5, color="#4c72b0", ms=7)
    for x, m, s in zip(xs, means, stds, strict=True):
        ax.annotate(fmt.format(m) + (f" ± {fmt.format(s)}" if s else ""), (x, m + s), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=8)  # fmt: skip
    _zoomed(
        ax,
        [m - s for m, s in zip(means, stds, strict=True)],
        [m + s for m, s in zip(means, stds, strict=True)],
    )
    top = ax.get_ylim()[1]
    ax.set_ylim(ax.get_ylim()[0], top + 0.12 * (top - ax.get_ylim()[0]))  # room for the labels
    ax.set_xticks(list(xs), labels, rotation=15)
    ax.set_xlim(-0.5, len(policies) - 0.5)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{results['config']['benchmark']}: {title} (mean ± std over seeds; axis not from 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def learning_curve(training: Sequence[Mapping[str, Any]], benchmark: str, path: Path) -> Path | None:
    """Validation return against training decisions: one thin line per seed, their mean bold."""
    import matplotlib.pyplot as plt
    import numpy as np

    runs = [t for t in training if t.get("history")]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    by_step: dict[float, list[float]] = {}
    values = []
    for t in runs:
        steps = [h["step"] for h in t["history"]]
        vals = [h["val_return"] for h in t["history"]]
        values += vals
        ax.plot(steps, vals, "o-", lw=1, ms=3, alpha=0.45, label=f"seed {t['seed']}")
        for s, v in zip(steps, vals, strict=True):
            by_step.setdefault(s, []).append(v)
    steps = sorted(s for s, v in by_step.items() if len(v) == len(runs))
    if steps:
        mean = [float(np.mean(by_step[s])) for s in steps]
        ax.plot(steps, mean, "-", lw=2.5, color="black", label="mean")
        for s, m in zip(steps, mean, strict=True):
            ax.annotate(
                f"{m:.2f}", (s, m), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8
            )
    _zoomed(ax, values, values)
    ax.set_xlabel("training decisions")
    ax.set_ylabel("validation return")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"{benchmark}: masked-DQN learning curves (validation return per checkpoint)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(
    results: Mapping[str, Any], out_dir: Path, training: Sequence[Mapping[str, Any]] | None = None
) -> list[Path]:
    """``score.png`` and ``tokens.png`` (per policy) and, when selectors were trained (in
    `results["training"]` or `training`), ``learning_curve.png``."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir = Path(out_dir)
    paths = [
        _metric_plot(results, "score", "score (0–100)", "{:.1f}", out_dir / "score.png"),
        _metric_plot(results, "total_tokens_m", "task-run tokens (M)", "{:.3f}", out_dir / "tokens.png"),
    ]
    curve = learning_curve(
        training or results.get("training") or [],
        results["config"]["benchmark"],
        out_dir / "learning_curve.png",
    )
    return paths + ([curve] if curve is not None else [])
