"""`cm-gym build` and `cm-gym memory` end to end (real SimulatedLLM on the toy benchmark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.cli import main
from cm_gym.memory.snapshot import FrozenStore, load_readonly


def test_build_resume_freeze_and_inspect(
    memtoy_benchmark: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, snap, js = tmp_path / "store.sqlite", tmp_path / "snap.sqlite", tmp_path / "summary.json"
    argv = ["build", "--benchmark", memtoy_benchmark, "--out", str(out), "--split", "all", "--limit", "12"]
    assert main([*argv, "--no-progress", "--freeze", str(snap), "--json", str(js)]) == 0
    text = capsys.readouterr().out
    assert "0 already processed" in text and "alternatives checked" in text and "verification" in text
    summary = json.loads(js.read_text())
    assert summary["tasks"] == 12 and summary["admitted"] >= 1
    frozen = FrozenStore.open(snap)
    assert len(frozen) == summary["records"] == len(load_readonly(out))
    assert main([*argv, "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "12 already processed" in text and "tasks processed      0 (skipped, already processed: 12" in text

    rid = frozen.records[0].record_id
    assert main(["memory", "list", str(snap)]) == 0
    text = capsys.readouterr().out
    assert rid in text and "cmp:GT->GTE" in text and "…" not in text  # conditions wrap, never cut
    assert main(["memory", "show", str(snap), rid[:8]]) == 0
    text = capsys.readouterr().out
    assert f"record        {rid}" in text and "as shown to the agent" in text and "at least" in text
    assert main(["memory", "show", str(snap), rid, "--no-condition"]) == 0
    assert "Applies only when" not in capsys.readouterr().out
    assert main(["memory", "export", str(out), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(frozen) and {"record_id", "condition", "evidence", "u"} <= set(rows[0])
    assert main(["memory", "stats", str(snap)]) == 0
    assert "contrast keys" in capsys.readouterr().out
    assert main(["memory", "verify", str(snap)]) == 0
    assert "sha256 matches manifest" in capsys.readouterr().out
    snap2 = tmp_path / "snap2.sqlite"
    assert main(["memory", "freeze", str(out), str(snap2)]) == 0
    assert f"{len(frozen)} records, sha256" in capsys.readouterr().out
    assert FrozenStore.open(snap2).records == frozen.records
    assert main(["memory", "freeze", str(snap2), str(tmp_path / "x.sqlite")]) == 2
    assert "already a frozen snapshot" in capsys.readouterr().err


def test_build_on_the_build_split_with_progress_bar(
    memtoy_benchmark: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.sqlite"
    assert main(["build", "--benchmark", memtoy_benchmark, "--out", str(out), "--checkpoints", "0,4"]) == 0
    captured = capsys.readouterr()
    assert "16 tasks" in captured.out  # 40 % of the 40 toy tasks
    assert "build" in captured.err  # the tqdm bar
    assert (tmp_path / "s-checkpoints" / "checkpoint-0004.sqlite").is_file()


def test_errors_are_clear(memtoy_benchmark: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not sqlite" * 50)
    assert main(["memory", "list", str(bad)]) == 2
    assert "not a SQLite database" in capsys.readouterr().err
    good = tmp_path / "s.sqlite"
    assert (
        main(["build", "--benchmark", memtoy_benchmark, "--out", str(good), "--limit", "1", "--no-progress"])
        == 0
    )
    capsys.readouterr()
    assert main(["memory", "show", str(good), "ffffffffffff"]) == 2
    assert "no record" in capsys.readouterr().err
