"""The diagnose figure has honest axes (bars from 0), whole labels and labelled references (issue 36)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from cm_gym.studies.analysis.diagnose import POLICY_NAMES  # noqa: E402
from cm_gym.studies.analysis.peeked import SLOT_FEATURE_NAMES  # noqa: E402
from cm_gym.studies.analysis.plots import PLACE_SUBTITLE, diagnose_figure, write_diagnose_plot  # noqa: E402


def _result() -> dict[str, Any]:
    """A small result shaped like `run_diagnose`'s, scores high enough that an old zoomed axis would start at 70."""
    scores = {
        "none": 80.0,
        "top1": 82.5,
        "random": 84.0,
        "cf_memory": 88.0,
        "supervised": 90.0,
        "oracle": 96.0,
    }
    gap = scores["oracle"] - scores["random"]
    slots = [{"slot": j, "uses": 100 * j, "no_op": 0.5, "harmful": 0.2, "helpful": 0.3} for j in (1, 2, 3, 4)]
    return {
        "config": {"benchmark": "SQL", "seeds": [0, 1]},
        "split": {"build": 40, "train": 16, "eval": 16},
        "records": 12,
        "scores": {k: {"score": v, "per_seed": [v]} for k, v in scores.items()},
        "oracle_minus_random": gap,
        "place_between_random_and_oracle": {
            k: (scores[k] - scores["random"]) / gap for k in ("top1", "cf_memory", "supervised")
        },
        "slots": [*slots, {"slot": "all", "uses": 1000, "no_op": 0.5, "harmful": 0.2, "helpful": 0.3}],
        "feature_auc": {name: 0.4 + 0.02 * i for i, name in enumerate(SLOT_FEATURE_NAMES)}
        | {"applies": None},
    }


def _ticks(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def test_bars_start_at_zero_under_whole_labels() -> None:
    import matplotlib.pyplot as plt

    result = _result()
    fig = diagnose_figure(result)
    try:
        scores, slots, aucs = fig.axes[:3]
        for ax in (scores, slots, aucs):
            assert ax.get_xlim()[0] == 0.0  # no zoomed axis: every bar is drawn from 0
            assert all(p.get_x() == 0.0 for p in ax.patches)
        assert _ticks(scores) == [POLICY_NAMES[k] for k in result["scores"]]  # whole names
        assert _ticks(slots) == [
            *(f"slot {j} ({100 * j} uses)" for j in (1, 2, 3, 4)),
            "all slots (1000 uses)",
        ]
        assert _ticks(aucs) == [k for k, v in result["feature_auc"].items() if v is not None]
        refs = [t.get_text() for t in scores.get_legend().get_texts()]
        assert refs == ["random valid = 84.0", "oracle = 96.0"]
        assert "no signal" in aucs.get_legend().get_texts()[0].get_text()
        assert PLACE_SUBTITLE in fig.get_suptitle()
        notes = [t.get_text() for t in scores.texts]
        assert "88.0  (place +0.33)" in notes and "84.0" in notes
    finally:
        plt.close(fig)


def test_labels_do_not_overlap(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = diagnose_figure(_result())
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        boxes = [(ax, [t.get_window_extent(renderer) for t in ax.get_yticklabels()]) for ax in fig.axes[:3]]
        for _ax, labels in boxes:
            for a, b in zip(labels, labels[1:], strict=False):
                assert not a.overlaps(b)  # one label per row, none on its neighbour
        for (ax, _labels), (_, next_labels) in zip(boxes, boxes[1:], strict=False):
            assert (
                min(b.x0 for b in next_labels) >= ax.get_window_extent(renderer).x1
            )  # no label on the panel before
    finally:
        plt.close(fig)
    path = write_diagnose_plot(_result(), tmp_path)
    assert path == tmp_path / "diagnose.png" and path.stat().st_size > 10_000


def test_a_diagnosis_with_no_auc_and_no_slot_rows_still_draws(tmp_path: Path) -> None:
    result = _result() | {"feature_auc": dict.fromkeys(SLOT_FEATURE_NAMES), "slots": []}
    del result["scores"]["cf_memory"]
    assert write_diagnose_plot(result, tmp_path).stat().st_size > 10_000
