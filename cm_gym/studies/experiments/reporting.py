"""Experiment reports: tables with our number and its CI beside the paper's, the paper's
directions with a verdict each, and plots — written as Markdown, JSON and PNG.

Verdicts are mechanical, so nobody's wishful reading enters a report: a direction is
"reproduced" when our estimate has the paper's sign (or order) and its paired 95% CI excludes the
opposite, "not reproduced" when the CI lies on the other side, "inconclusive" when the CI
straddles it, and "not measured" when the run had nothing to compare.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.studies.experiments.stats import Estimate

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "not measured")


@dataclass(frozen=True)
class Cell:
    """Our estimate (with CI) and the paper's number for one table cell."""

    ours: Estimate | None = None
    paper: float | None = None
    fmt: str = "{:.1f}"

    def text(self) -> str:
        ours = "—"
        if self.ours is not None and self.ours.value is not None:
            ours = self.fmt.format(self.ours.value)
            if self.ours.lo is not None and self.ours.hi is not None and self.ours.lo != self.ours.hi:
                ours += f" [{self.fmt.format(self.ours.lo)}, {self.fmt.format(self.ours.hi)}]"
        paper = self.fmt.format(self.paper) if self.paper is not None else "—"
        return f"{ours} / {paper}"

    def as_dict(self) -> dict[str, Any]:
        return {"ours": self.ours.as_dict() if self.ours is not None else None, "paper": self.paper}


@dataclass
class Table:
    """Rows of cells under named columns; every cell reads "ours [95% CI] / paper"."""

    title: str
    columns: list[str]
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    note: str = ""

    def markdown(self) -> str:
        head = "| | " + " | ".join(self.columns) + " |"
        rule = "|---|" + "---|" * len(self.columns)
        lines = [f"### {self.title}", "", "Each cell: ours [95% bootstrap CI] / paper.", "", head, rule]
        lines += [
            "| " + label + " | " + " | ".join(c.text() for c in cells) + " |" for label, cells in self.rows
        ]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": self.columns,
            "rows": [{"label": label, "cells": [c.as_dict() for c in cells]} for label, cells in self.rows],
            "note": self.note,
        }


@dataclass(frozen=True)
class Direction:
    """One of the paper's reported directions, the paper's numbers, ours, and the verdict."""

    claim: str
    paper: str
    ours: str
    verdict: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def verdict_positive(est: Estimate | None) -> str:
    """The verdict for "this difference is positive" from a paired estimate."""
    if est is None or est.value is None or est.n == 0:
        return "not measured"
    if est.lo is not None and est.lo > 0:
        return "reproduced"
    if est.hi is not None and est.hi < 0:
        return "not reproduced"
    return "inconclusive"


def verdict_all(verdicts: Sequence[str]) -> str:
    """All parts reproduced → reproduced; any part contradicted → not reproduced; else inconclusive."""
    real = [v for v in verdicts if v != "not measured"]
    if not real:
        return "not measured"
    if all(v == "reproduced" for v in real):
        return "reproduced"
    if any(v == "not reproduced" for v in real):
        return "not reproduced"
    return "inconclusive"


def fmt_est(est: Estimate | None, fmt: str = "{:+.1f}") -> str:
    if est is None or est.value is None:
        return "n/a"
    ci = f" [{fmt.format(est.lo)}, {fmt.format(est.hi)}]" if est.lo is not None and est.hi is not None else ""
    return f"{fmt.format(est.value)}{ci} (n={est.n})"


@dataclass
class Report:
    """One study's report."""

    name: str
    title: str
    description: str
    config: dict[str, Any]
    tables: list[Table] = field(default_factory=list)
    directions: list[Direction] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def lead_paragraph(doc: str | None) -> str:
        """The first paragraph of a study module's docstring on one line: its report description."""
        return (doc or "").split("\n\n")[0].replace("\n", " ")

    def markdown(self) -> str:
        c = self.config
        lines = [
            f"# {self.title}",
            "",
            self.description,
            "",
            f"Benchmarks: {', '.join(c.get('benchmarks', []))}; agents: {', '.join(c.get('agents', []))}; "
            f"selector seeds: {', '.join(map(str, c.get('seeds', [])))}; LLM: {c.get('llm')} "
            f"(seed {c.get('llm_seed')}); {'quick (smoke) sizes' if c.get('quick') else 'full sizes'}. "
            f"CIs: percentile bootstrap over tasks ({c.get('bootstrap_resamples')} resamples), seeds "
            "averaged per task; differences are paired by task.",
            "",
        ]
        for table in self.tables:
            lines += [table.markdown(), ""]
        if self.directions:
            lines += [
                "### The paper's directions, checked",
                "",
                "| paper's direction | paper | ours | verdict |",
                "|---|---|---|---|",
            ]
            lines += [f"| {d.claim} | {d.paper} | {d.ours} | **{d.verdict}** |" for d in self.directions]
            lines.append("")
        for fig in self.figures:
            lines += [f"![{Path(fig).stem}]({Path(fig).name})", ""]
        if self.notes:
            lines += ["### Notes", ""] + [f"- {n}" for n in self.notes] + [""]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "config": self.config,
            "tables": [t.as_dict() for t in self.tables],
            "directions": [asdict(d) for d in self.directions],
            "figures": [Path(f).name for f in self.figures],
            "notes": self.notes,
            "data": _clean(self.data),
        }

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        """``report.md`` and ``report.json`` into `out_dir` (figures are already there)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        md, js = out_dir / "report.md", out_dir / "report.json"
        md.write_text(self.markdown(), encoding="utf-8")
        js.write_text(json.dumps(self.as_dict(), indent=1, default=str), encoding="utf-8")
        return md, js


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, Estimate):
        return obj.as_dict()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def bar_plot(
    path: Path,
    title: str,
    groups: Sequence[str],
    series: dict[str, Sequence[Estimate | None]],
    paper: dict[str, Sequence[float | None]] | None = None,
    ylabel: str = "",
) -> Path:
    """Grouped bars (ours, with CI whiskers) and the paper's values as black ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(series)
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * max(1, len(names)) / 2), 3.6))
    x = np.arange(len(groups))
    for i, name in enumerate(names):
        ests = series[name]
        vals = [e.value if e is not None and e.value is not None else np.nan for e in ests]
        lo = [v - e.lo if e is not None and e.lo is not None else 0 for v, e in zip(vals, ests, strict=True)]
        hi = [e.hi - v if e is not None and e.hi is not None else 0 for v, e in zip(vals, ests, strict=True)]
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, vals, width, yerr=[lo, hi], capsize=3, label=name)
        for p, v in zip(pos, vals, strict=True):
            if not np.isnan(v):
                ax.annotate(f"{v:.1f}", (p, v), ha="center", va="bottom", fontsize=7)
        if paper and name in paper:
            for p, v in zip(pos, paper[name], strict=True):
                if v is not None:
                    ax.plot([p - width / 2, p + width / 2], [v, v], color="black", lw=2)
    ax.set_xticks(x, groups)
    ax.set_title(title + ("  (black ticks: paper)" if paper else ""))
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, ncols=min(4, len(names)))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def line_plot(
    path: Path,
    title: str,
    xs: Sequence[float],
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    ylabel: str,
) -> Path:
    """Lines with ±1 sd bands (series: name → (means, sds))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, (means, sds) in series.items():
        m, s = np.asarray(means, dtype=float), np.asarray(sds, dtype=float)
        ax.plot(xs, m, marker="o", label=name)
        ax.fill_between(xs, m - s, m + s, alpha=0.2)
    ax.set_xlabel("source tasks processed")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
