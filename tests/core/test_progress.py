"""Progress output (issue 26): bars on a terminal, whole lines when piped, one line per selector
seed, silence with CM_GYM_PROGRESS=0, and SB3's learn reporting its decisions."""

from __future__ import annotations

import io
import time

import gymnasium as gym
import pytest

import cm_gym.core.progress as progress
from cm_gym.cli.run import PhaseBar
from cm_gym.core.progress import LineProgress, progress_bar
from cm_gym.protocol.training import DecisionProgress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_piped_output_is_whole_lines_without_carriage_returns() -> None:
    out = io.StringIO()
    bar = progress_bar(200, "build", "task", file=out)
    assert isinstance(bar, LineProgress)
    for _ in range(200):
        bar.update(1)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "build: started (200 task)"
    assert lines[-1].startswith("build: 200/200 task (100%), ") and "elapsed" not in lines[-1]
    assert len(lines) <= 12  # a start line, at most one per tenth, the final line


def test_a_terminal_gets_a_tqdm_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CM_GYM_PROGRESS", raising=False)
    bar = progress_bar(3, "x", file=_Tty())
    assert type(bar).__name__ == "tqdm"
    bar.close()


def test_lines_report_eta_and_postfix_and_slow_work_still_shows_life(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    bar = LineProgress(1000, "units", "unit", file=out, min_interval=0.0)
    bar.n = 100
    bar.set_postfix(records=7)
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("units: 100/1000 unit (10%)") and "left" in line and line.endswith("records=7")
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)  # no new tenth, but time has passed
    bar.update(1)
    assert out.getvalue().splitlines()[-1].startswith("units: 101/1000 unit")


def test_cm_gym_progress_0_silences_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_PROGRESS", "0")
    out = _Tty()
    with progress_bar(10, "quiet", file=out) as bar:
        bar.update(10)
    assert out.getvalue() == ""


def test_phase_bar_prints_one_line_per_selector_seed(capsys: pytest.CaptureFixture[str]) -> None:
    bar = PhaseBar(True)
    for i in range(6):
        bar("train", i, 5)
        time.sleep(0.001)
    bar("evaluate", 0, 2)
    bar.close()
    err = capsys.readouterr().err
    seeds = [line for line in err.splitlines() if line.startswith("train: ") and "/5 seed" in line]
    assert [line.split()[1] for line in seeds] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert "evaluate: started (2 run)" in err


def test_decision_progress_counts_sb3_decisions(capsys: pytest.CaptureFixture[str]) -> None:
    from stable_baselines3 import DQN

    model = DQN("MlpPolicy", gym.make("CartPole-v1"), learning_starts=10, seed=0)
    model.learn(120, callback=DecisionProgress("learn", steps=4))
    err = capsys.readouterr().err
    assert "learn: started (120 decision)" in err
    assert err.strip().splitlines()[-1].startswith("learn: 120/120 decision (100%)")
