"""The real-model runs cm_gym ships replay exactly, anywhere, with 0 live calls.

For each run recorded in a shipped manifest (`cm_gym/llm/real_runs/<model>.manifest.json`, written
by ``bench/ship_real_run.py``), `cm-gym run` is repeated with ``--llm-cache-mode ro`` in a fresh
cache folder: the shipped replies are merged into it, no engine starts, every reply is real, and
every policy's score is the one the live run got. A missing reply would be a `CacheMissError`
(exit 2), never a silent simulation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.cli import main
from cm_gym.llm import llama_engine
from cm_gym.llm.shipped import SHIPPED_DIR

pytestmark = [pytest.mark.slow, pytest.mark.data, pytest.mark.timeout(1800)]

MANIFESTS = sorted(SHIPPED_DIR.glob("*.manifest.json"))
RUNS = [
    (m.name.removesuffix(".manifest.json"), run)
    for m in MANIFESTS
    for run in json.loads(m.read_text()).get("runs", [])
    if run.get("ci") is True  # only runs marked for CI: a HumanEval replay takes 30 min
]


def test_a_real_run_is_shipped() -> None:
    assert RUNS, f"no shipped real-model run with a replay command in {SHIPPED_DIR}"


@pytest.mark.parametrize(
    ("model", "run"), RUNS, ids=[f"{m}-{r['benchmark']}-{r['split'][:12]}" for m, r in RUNS]
)
def test_a_shipped_run_replays_exactly_without_an_engine(
    model: str, run: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    started: list[object] = []
    monkeypatch.setattr(llama_engine.Engine, "start", lambda self, *a, **k: started.append(self))
    out = tmp_path / "run"
    assert run["command"][0] == "run"
    argv = [*run["command"], "--llm-cache-mode", "ro", "--out-dir", str(out), "--no-progress"]
    assert main(argv) == 0
    assert not started  # no engine, no weights needed
    results = json.loads((out / "results.json").read_text())
    replies = results["llm"]["replies"]
    assert replies["simulated"] == 0 and replies["real"] > 0
    assert set(replies["real_by_system"]) == {model}
    scores = {name: p["mean"]["score"]["mean"] for name, p in results["policies"].items()}
    assert scores == pytest.approx(run["scores"], abs=1e-9)
