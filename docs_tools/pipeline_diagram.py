"""Draw the protocol's pipeline (build → freeze → train → evaluate) as docs/images/pipeline.png.

    python docs_tools/pipeline_diagram.py [OUT.png]

Boxes and arrows in matplotlib, 800 px wide: the three task sets on top, the four phases in the
middle, what each phase leaves behind below (the record store, the frozen snapshot, the selector,
results.json), and the frozen LLM and the world model that every phase calls at the bottom.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "pipeline.png"
#: x centre of each phase's column (axes fraction)
XS = (0.125, 0.375, 0.625, 0.875)
Y_TASKS, Y_PHASE, Y_ART, Y_BASE = 0.86, 0.6, 0.35, 0.1
TASKS, PHASE, ART, BASE = "#f2f2f2", "#dbe6f4", "#fbe9d0", "#e3f1e3"


def _box(ax: Any, x: float, y: float, w: float, h: float, text: str, colour: str, **kw: Any) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.008,rounding_size=0.015",
            fc=colour,
            ec="#333333",
            lw=1.0,
        )  # fmt: skip
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=kw.get("fontsize", 9), linespacing=1.25)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], **kw: Any) -> None:
    ax.annotate(
        "", xy=end, xytext=start,
        arrowprops={"arrowstyle": "-|>", "color": kw.get("color", "#333333"), "lw": kw.get("lw", 1.3),
                    "ls": kw.get("ls", "-"), "shrinkA": 0, "shrinkB": 0,
                    "connectionstyle": kw.get("connection", "arc3")},
    )  # fmt: skip


def figure() -> Any:
    """The diagram as a matplotlib Figure (8 × 5 in: 800 px wide at dpi 100)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    pw, ph = 0.22, 0.16  # phase boxes
    aw, ah = 0.2, 0.11  # artefacts, task sets
    tasks = {0: "T_build tasks", 2: "T_train tasks\n(half: validation)", 3: "T_eval tasks\n(held out)"}
    for i, text in tasks.items():
        _box(ax, XS[i], Y_TASKS, aw, ah, text, TASKS)
        _arrow(ax, (XS[i], Y_TASKS - ah / 2 - 0.01), (XS[i], Y_PHASE + ph / 2 + 0.01))
    phases = (
        "1  build\nfailed drafts → K\nalternatives, verified\n→ Δ → admission",
        "2  freeze\nthe store is copied\nread-only, never\nwritten again",
        "3  train\nselector learns to show\none record or skip\n(masked DQN per seed)",
        "4  evaluate\nNone · Top-1 · Random\nCF Memory · Oracle\nstore + policies frozen",
    )
    for x, text in zip(XS, phases, strict=True):
        _box(ax, x, Y_PHASE, pw, ph, text, PHASE)
    arts = ("record store\n(verified records)", "snapshot\n(frozen store)", "selector\n(best checkpoint)",
            "results.json\nscores, paired CIs")  # fmt: skip
    art_x = (*XS[:3], XS[3] + 0.025)  # results.json sits right, leaving a lane for the snapshot's arrow
    for x, ax_x, text in zip(XS, art_x, arts, strict=True):
        _box(ax, ax_x, Y_ART, aw - 0.03 * (ax_x != x), ah, text, ART)
        _arrow(ax, (ax_x, Y_PHASE - ph / 2 - 0.01), (ax_x, Y_ART + ah / 2 + 0.01))
    # the store feeds freeze; the snapshot feeds train; the selector feeds evaluate
    for i in range(3):
        _arrow(ax, (XS[i] + aw / 2 + 0.005, Y_ART + 0.02), (XS[i + 1] - pw / 2 - 0.005, Y_PHASE - 0.04))
    # and the snapshot feeds evaluate, below the artefacts
    lane, low = XS[3] - pw / 2 + 0.025, Y_ART - ah / 2 - 0.06
    colour = "#8a6d3b"
    ax.plot([XS[1], XS[1], lane], [Y_ART - ah / 2 - 0.005, low, low], color=colour, lw=1.1)
    _arrow(ax, (lane, low), (lane, Y_PHASE - ph / 2 - 0.005), color=colour, lw=1.1)
    ax.text((XS[1] + lane) / 2, low + 0.008, "the same snapshot, read-only", ha="center", va="bottom",
            fontsize=8, color=colour)  # fmt: skip
    _box(ax, 0.27, Y_BASE, 0.5, 0.1, "frozen LLM (never trained): drafts, alternatives,\nrevises with the shown record",
         BASE, fontsize=8.5)  # fmt: skip
    _box(ax, 0.77, Y_BASE, 0.42, 0.1, "world model (evaluator, on a fork):\nU of every action → reward",
         BASE, fontsize=8.5)  # fmt: skip
    ax.text(0.5, 0.99, "The protocol: build → freeze → train → evaluate", ha="center", va="top",
            fontsize=11, weight="bold")  # fmt: skip
    ax.text(0.5, 0.165, "every phase calls the frozen LLM and the world model; only the selector learns",
            ha="center", fontsize=8, style="italic")  # fmt: skip
    fig.subplots_adjust(0.01, 0.01, 0.99, 0.99)
    return fig


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else OUT
    fig = figure()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
