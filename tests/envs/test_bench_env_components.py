"""`bench/bench_env_components.py` (issue 35): each named component's CPU share of a fresh
process's decision loop, read from timers that wrap functions, static methods and methods."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_env_components.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_env_components", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_components_are_timed_in_a_fresh_process_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    where = [
        ("check", "cm_gym.agent:BaseAgent.evaluate"),
        ("never called", "cm_gym.envs._observation:ObservationMixin.decision_context"),
        ("features", "cm_gym.envs.features:build_observation"),
        ("static", "cm_gym.memory.retrieval:Retriever._other_task_mask"),  # a staticmethod
    ]
    out = bench.one_run("cm_gym/SQL-v0", 40, 3, where, "first")
    assert out["loop"] > 0
    assert out["calls"]["check"] >= 1 and out["calls"]["features"] >= 40  # one per decision at least
    assert out["calls"]["static"] >= 1
    assert 0 < out["cpu"]["check"] < out["loop"] and "never called" not in out["calls"]
    collector_cpu, collections, full = out["gc"]  # the collector's CPU within the timed loop only
    assert 0 <= collector_cpu < out["loop"] and full <= collections
    assert (
        bench.main(
            ["--decisions", "20", "--runs", "1", "--component", "check=cm_gym.agent:BaseAgent.evaluate"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "cm_gym/SQL-v0, first process, 20 decisions" in printed and "check" in printed
    assert "the cyclic garbage collector" in printed and "gc.freeze()" not in printed


def test_freeze_takes_the_makes_objects_out_of_the_collector() -> None:
    """``--freeze``: the timed process freezes what its ``gym.make`` left (tens of thousands of
    objects: modules, the tasks, the store); without it nothing is frozen."""
    bench = _bench()
    frozen = bench.one_run("cm_gym/SQL-v0", 5, 3, [], "first", freeze=True)
    plain = bench.one_run("cm_gym/SQL-v0", 5, 3, [], "first")
    assert frozen["frozen"] > 10_000 and plain["frozen"] == 0


def test_a_component_without_a_module_path_is_refused() -> None:
    with pytest.raises(SystemExit):
        _bench().main(["--component", "nonsense"])
