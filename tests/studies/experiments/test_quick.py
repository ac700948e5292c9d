"""`cm-gym experiment all --quick`: every study runs at smoke size, writes its report (Markdown,
JSON, plots) with the paper's numbers beside ours and a verdict for each paper direction, and a
rerun reuses every unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.cli import main
from cm_gym.studies.experiments import STUDIES
from cm_gym.studies.experiments.reporting import VERDICTS


@pytest.mark.slow
def test_all_quick_writes_every_report_and_reruns_from_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results"
    assert main(["experiment", "all", "--quick", "--results", str(results), "--no-progress"]) == 0
    units = sorted(p for p in (results / "units").glob("*/*") if p.is_dir())
    assert units and all((u / "result.json").is_file() for u in units)
    for name in STUDIES:
        folder = results / "reports" / name
        report = json.loads((folder / "report.json").read_text())
        md = (folder / "report.md").read_text()
        assert report["name"] == name and report["config"]["quick"] is True
        assert report["tables"] and "ours [95% bootstrap CI] / paper" in md
        papers = [
            c["paper"]
            for t in report["tables"]
            for r in t["rows"]
            for c in r["cells"]
            if c["paper"] is not None
        ]
        ours = [
            c["ours"]["value"] for t in report["tables"] for r in t["rows"] for c in r["cells"] if c["ours"]
        ]
        assert any(v is not None for v in ours), f"{name}: nothing measured"
        assert papers or name == "accumulation", f"{name}: no paper number (only Fig. 2a-c gives none)"
        assert report["directions"] and all(d["verdict"] in VERDICTS for d in report["directions"])
        for fig in report["figures"]:
            assert (folder / fig).stat().st_size > 1000
    assert "table1:" in capsys.readouterr().out
    # a rerun of one study recomputes nothing: no new unit folders
    assert (
        main(["experiment", "table1", "ablations", "--quick", "--results", str(results), "--no-progress"])
        == 0
    )
    assert sorted(p for p in (results / "units").glob("*/*") if p.is_dir()) == units


def test_unknown_study_and_bad_workers_are_one_line_errors(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["experiment", "table9"])
    assert "invalid choice" in capsys.readouterr().err
    assert main(["experiment", "table1", "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
