"""docs_tools/pipeline_diagram.py draws every part of the protocol, 800 px wide (issue 36 item 3)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]


def test_the_diagram_names_every_part_and_is_800_px_wide(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.image import imread

    spec = importlib.util.spec_from_file_location(
        "pipeline_diagram", ROOT / "docs_tools" / "pipeline_diagram.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fig = mod.figure()
    text = " ".join(t.get_text() for t in fig.axes[0].texts)
    plt.close(fig)
    for part in ("T_build", "T_train", "T_eval", "build", "freeze", "train", "evaluate", "record store",
                 "snapshot", "selector", "frozen LLM", "world model"):  # fmt: skip
        assert part in text
    assert mod.main([str(tmp_path / "p.png")]) == 0
    assert imread(tmp_path / "p.png").shape[1] == 800
    assert (ROOT / "docs" / "images" / "pipeline.png").stat().st_size > 10_000  # the committed image
