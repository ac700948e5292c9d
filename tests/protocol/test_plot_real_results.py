"""`bench/plot_real_results.py` reads the README's real-mistake and real-model tables and draws one
chart row per table row (issue 36 item 3)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]


def _module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "plot_real_results", ROOT / "bench" / "plot_real_results.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def test_the_readme_tables_parse_into_numeric_rows() -> None:
    mod = _module()
    tables = mod.readme_tables((ROOT / "README.md").read_text(encoding="utf-8"))
    assert set(tables) == {"mistakes", "model"}
    for key, ci_names in (
        ("mistakes", {"CF − Random", "CF − Top-1"}),
        ("model", {"CF − None", "CF − Random"}),
    ):
        rows = mod.rows_of(tables[key])
        assert len(rows) > 0
        for row in rows:
            assert set(row.scores) == {"None", "Top-1", "Random", "CF Memory", "Oracle"}
            assert all(0.0 <= v <= 100.0 for v in row.scores.values())
            assert set(row.cis) == ci_names
            assert all(lo <= diff <= hi for diff, lo, hi in row.cis.values())
    first = mod.rows_of(tables["mistakes"])[0]
    assert first.label.startswith("recorded:") and first.cis["CF − Random"] == (-0.3, -1.2, 0.0)  # "−" read


def test_cells_with_typographic_minus_and_notes() -> None:
    mod = _module()
    assert mod.interval("+0.4 [+0.0, +1.2] (1 task)") == (0.4, 0.0, 1.2)
    assert mod.interval("−0.5 [−1.8, +0.3]") == (-0.5, -1.8, 0.3)
    assert mod.interval("—") is None and mod.number("—") is None and mod.number("75.1") == 75.1


def test_one_chart_row_per_table_row(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    mod = _module()
    tables = mod.readme_tables((ROOT / "README.md").read_text(encoding="utf-8"))
    for key, table in tables.items():
        rows = mod.rows_of(table)
        fig = mod.chart(rows, key)
        try:
            left = fig.axes[0]
            assert [t.get_text() for t in left.get_yticklabels()] == [r.label for r in rows]
            assert "zoomed" in left.get_xlabel()  # a dot axis not from 0 says so
        finally:
            plt.close(fig)
    assert mod.main(["--out-dir", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {"real-mistakes.png", "real-model.png"}


def test_run_folders_go_through_the_table_scripts(tmp_path: Path) -> None:
    """Given run folders, the rows come from real_mistake_table.py / real_model_table.py's readers."""
    from tests.protocol.test_real_mistake_table import _main_policies, _write_run

    run = _write_run(
        tmp_path, "recorded:gpt-4-zero-shot", "sampled", _main_policies(), [("cmp:EQ->NEQ", "real", "edit")]
    )
    mod = _module()
    tables = mod.from_runs([str(run)], [f"my run={run / 'results.json'}"])
    mistakes, model = mod.rows_of(tables["mistakes"]), mod.rows_of(tables["model"])
    assert [r.label for r in mistakes] == ["recorded:gpt-4-zero-shot, paper's (tasks by seed)"]
    assert mistakes[0].scores == {
        "None": 50.0,
        "Top-1": 51.0,
        "Random": 52.0,
        "CF Memory": 53.0,
        "Oracle": 75.0,
    }
    assert mistakes[0].cis == {"CF − Random": (-1.0, -2.0, 0.0), "CF − Top-1": (-3.0, -4.0, 0.5)}
    assert [r.label for r in model] == ["my run"] and model[0].scores["Oracle"] == 75.0
    assert set(model[0].cis) == {"CF − None", "CF − Random"}
    out = tmp_path / "images"
    assert mod.main(["--mistakes", str(run), "--out-dir", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["real-mistakes.png"]
