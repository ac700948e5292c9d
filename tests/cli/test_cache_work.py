"""`cm-gym cache list|clear --work`: the work memo's files as the user sees them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cm_gym.cli import main
from cm_gym.core.workmemo import WorkMemo, marker_path, memo_key
from cm_gym.core.workmemo_files import clear_work


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    return tmp_path / "cache"


def written(version: str) -> WorkMemo:
    memo = WorkMemo("t", version)
    memo.put(memo_key(version), "V")
    memo.flush()
    return memo


def age(memo: WorkMemo, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(marker_path(memo.path), (then, then))


def test_cli_lists_and_clears_the_work_memo(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, live = written("cli-old"), written("cli-live")
    old.close()
    age(old, 5)
    assert main(["cache", "list", "--work", "--json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert listed[old.path.name]["state"] == "idle" and listed[old.path.name]["idle_days"] >= 4.9
    assert listed[live.path.name]["state"] == "in use"
    assert main(["cache", "clear", "--work", "--unused-days", "3", "--dry-run"]) == 0
    assert "would remove 1 work memo file(s)" in capsys.readouterr().out and old.path.is_file()
    assert main(["cache", "clear", "--work"]) == 0
    out = capsys.readouterr()
    assert "removed 1 work memo file(s)" in out.out and "in use by another process" in out.err
    assert not old.path.exists() and live.path.is_file()
    assert main(["cache", "list", "--work"]) == 0
    assert live.path.name in capsys.readouterr().out


def test_cli_refuses_bad_day_counts(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "clear", "--unused-days", "3"]) == 2  # applies to --work only
    assert "--work" in capsys.readouterr().err
    for bad in ("-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit) as exc:
            main(["cache", "clear", "--work", "--unused-days", bad])
        assert exc.value.code == 2
    with pytest.raises(ValueError, match="unused_days"):
        clear_work(float("nan"))
