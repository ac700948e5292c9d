"""The README's real-mistake and real-model tables as dot-and-whisker charts (issue 36 item 3).

    python bench/plot_real_results.py                      # from README.md's two tables (the docs images)
    python bench/plot_real_results.py --mistakes RUN_DIR [RUN_DIR ...] --model LABEL=RUN_DIR/results.json ...

One chart per table, one row per table row. Left: the held-out score of None, Top-1, Random,
CF Memory and Oracle (mean over selector seeds). Right: every ``CF − …`` column of the table (the
two-level paired 95% CI, seeds and tasks resampled) with a zero line. The docs images
(`docs/images/real-mistakes.png`, `docs/images/real-model.png`) are drawn from README.md, since the
run folders are not in the repository; given run folders, the rows are first written by
`real_mistake_table.py` / `real_model_table.py` (their readers) and then parsed the same way.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: README heading -> (table key, output file name, chart title)
TABLES = {
    "On real mistakes": ("mistakes", "real-mistakes.png", "Recorded real drafts (SpiderSQL)"),
    "A real model in the loop": ("model", "real-model.png", "A real model in the loop (Qwen2.5-Coder-1.5B)"),
}
#: (table column, legend, colour, marker) of the scores drawn per row
POLICIES = (
    ("None", "None", "#8c8c8c", "s"),
    ("Top-1", "Top-1", "#55a868", "^"),
    ("Random", "Random valid", "#c44e52", "v"),
    ("CF Memory", "CF Memory (masked DQN)", "#4c72b0", "o"),
    ("Oracle", "Oracle (peeks)", "black", "D"),
)
_CI_COLOURS = ("#4c72b0", "#dd8452", "#937860")
_NUM = r"[+\-−]?\d+(?:\.\d+)?"
_CI = re.compile(rf"^\s*({_NUM})\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]")


def number(cell: str) -> float | None:
    """A score cell as a float (``—`` and empty cells are None; the typographic minus is read)."""
    match = re.match(rf"\s*({_NUM})", cell)
    return float(match.group(1).replace("−", "-")) if match else None


def interval(cell: str) -> tuple[float, float, float] | None:
    """``"+0.4 [+0.0, +1.2] (1 task)"`` as ``(diff, lo, hi)``; None when the cell holds no CI."""
    match = _CI.match(cell)
    return tuple(float(g.replace("−", "-")) for g in match.groups()) if match else None  # type: ignore[return-value]


def split_row(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_table(lines: Sequence[str]) -> list[dict[str, str]]:
    """The first Markdown table in `lines` as one ``{header: cell}`` dict per body row."""
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        return []
    header = split_row(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, split_row(line), strict=False)))
    return rows


def readme_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """The table right under each heading of `TABLES` in the README's text, keyed as `TABLES` says."""
    lines = text.splitlines()
    out = {}
    for heading, (key, _, _) in TABLES.items():
        at = lines.index(f"## {heading}")
        end = next((i for i in range(at + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        out[key] = parse_table(lines[at + 1 : end])
    return out


@dataclass
class Row:
    """One table row as drawn: its label, the policies' scores and the ``CF − …`` CIs."""

    label: str
    scores: dict[str, float] = field(default_factory=dict)
    cis: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def rows_of(table: Sequence[dict[str, str]]) -> list[Row]:
    out = []
    for cells in table:
        label = cells.get("run") or f"{cells.get('system', '?').strip('`')}, {cells.get('split', '?')}"
        row = Row(label=label)
        for column, *_ in POLICIES:
            value = number(cells.get(column, ""))
            if value is not None:
                row.scores[column] = value
        for column, cell in cells.items():
            ci = interval(cell) if column.startswith("CF − ") else None
            if ci is not None:
                row.cis[column.replace(" [95% CI]", "")] = ci
        out.append(row)
    return out


def chart(rows: Sequence[Row], title: str) -> Any:
    """Scores (left, one sub-row per policy so equal scores stay visible) and the ``CF − …`` CIs
    (right), one row per table row; returns the Figure."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(10, 2.2 + 0.55 * len(rows)), sharey=True, layout="constrained",
        gridspec_kw={"width_ratios": [1.2, 1]},
    )  # fmt: skip
    ys = list(range(len(rows)))
    for k, (column, legend, colour, marker) in enumerate(POLICIES):
        dy = (k - (len(POLICIES) - 1) / 2) * 0.15
        pts = [(row.scores[column], y + dy) for y, row in zip(ys, rows, strict=True) if column in row.scores]
        if pts:
            left.plot(*zip(*pts, strict=True), marker, color=colour, ms=5, label=legend, ls="none")
    values = [v for row in rows for v in row.scores.values()]
    lo, hi = (min(values), max(values)) if values else (0.0, 100.0)
    pad = max(2.0, 0.08 * (hi - lo))
    left.set_xlim(max(0.0, lo - pad), min(101.0, hi + pad))
    left.set_yticks(ys, [row.label for row in rows])
    left.set_ylim(len(rows) - 0.5, -0.5)
    left.set_xlabel(
        "held-out score (0–100), mean over selector seeds\n"
        f"(axis zoomed to {left.get_xlim()[0]:.0f}–{left.get_xlim()[1]:.0f}; dots, not bars)",
        fontsize=9,
    )
    left.grid(axis="x", alpha=0.3)
    names = list(dict.fromkeys(name for row in rows for name in row.cis))
    for k, name in enumerate(names):
        dy = (k - (len(names) - 1) / 2) * 0.22
        for y, row in zip(ys, rows, strict=True):
            if name in row.cis:
                diff, lo_ci, hi_ci = row.cis[name]
                right.errorbar([diff], [y + dy], xerr=[[diff - lo_ci], [hi_ci - diff]], fmt="o", ms=4, capsize=3,
                               color=_CI_COLOURS[k % 3], label=name if y == ys[0] else None)  # fmt: skip
    right.axvline(0.0, color="black", lw=1)
    x0, x1 = right.get_xlim()
    right.set_xlim(min(x0, -1.0), max(x1, 1.0))  # a CI of [0, 0] is drawn as a point, not a zoomed blur
    right.grid(axis="x", alpha=0.3)
    right.set_xlabel("paired difference (points)\ntwo-level 95% CI (seeds and tasks)", fontsize=9)
    handles = [h for ax in (left, right) for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=len(handles), frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def from_runs(mistakes: Sequence[str], model: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """The two tables written from run folders by the README's table scripts, then parsed."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import real_mistake_table as rmt
    import real_model_table as rm

    out: dict[str, list[dict[str, str]]] = {}
    if mistakes:
        runs = [rmt.load(Path(d)) for d in mistakes]
        out["mistakes"] = parse_table(
            [*rmt.HEADER.splitlines(), *(rmt.main_row(r, c) for r, c in rmt.group(runs))]
        )
    if model:
        pairs = [arg.partition("=") for arg in model]
        out["model"] = parse_table(
            [*rm.HEADER.splitlines(), *(rm.row(label, Path(p)) for label, _, p in pairs)]
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--mistakes", nargs="*", default=[], help="run folders for real_mistake_table.py")
    parser.add_argument("--model", nargs="*", default=[], help="LABEL=results.json for real_model_table.py")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--dpi", type=int, default=100)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = (
        from_runs(args.mistakes, args.model)
        if args.mistakes or args.model
        else readme_tables(args.readme.read_text(encoding="utf-8"))
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for key, name, title in TABLES.values():
        if tables.get(key):
            fig = chart(rows_of(tables[key]), title)
            fig.savefig(args.out_dir / name, dpi=args.dpi)
            plt.close(fig)
            print(args.out_dir / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
