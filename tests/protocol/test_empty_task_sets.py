"""Issue 33, item 6: a protocol command whose task set ends up empty (a recorded system on a
benchmark it does not cover, a split that leaves a side empty) is one clear error, not an empty
store with exit status 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.domains.registry import RegistryError, get_benchmark, register_benchmark
from cm_gym.protocol.config import ProtocolConfig, ProtocolError
from cm_gym.protocol.run import evaluate_all, run_protocol, train_all
from cm_gym.protocol.stores import prepare
from tests.toy_domain import ToyDomain, toy_tasks

ONE = "EmptySideToy"


def _one_task_benchmark() -> str:
    try:
        register_benchmark(ONE, domain=ToyDomain, load_tasks=lambda: toy_tasks(1), namespace="cm_gym_test")
    except RegistryError:
        get_benchmark(ONE)
    return ONE


def test_a_split_that_leaves_a_side_empty_is_one_protocol_error(tmp_path: Path) -> None:
    cfg = ProtocolConfig(benchmark=_one_task_benchmark(), out_dir=tmp_path / "out", seeds=(0,))
    prepare(cfg)  # no side required: callers that only read the split still get it
    with pytest.raises(ProtocolError, match=r"no .*tasks for EmptySideToy: the split of its 1 task") as info:
        prepare(cfg, need=("build", "train", "eval"))
    assert "\n" not in str(info.value)
    for step in (lambda: run_protocol(cfg), lambda: train_all(cfg)):
        with pytest.raises(ProtocolError, match="nothing to do"):
            step()
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_evaluation_needs_only_eval_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cm_gym.core.types import Split
    from cm_gym.domains.registry import BenchmarkSpec

    monkeypatch.setattr(  # every task on the build side: a filter that leaves no eval task
        BenchmarkSpec,
        "make_split",
        lambda self, tasks, **_: Split(
            build=tuple(t.task_id for t in tasks), train=(), validation=(), eval=()
        ),
    )
    cfg = ProtocolConfig(benchmark=_one_task_benchmark(), out_dir=tmp_path, store=tmp_path / "s.sqlite")
    with pytest.raises(ProtocolError, match="no eval tasks for EmptySideToy"):
        evaluate_all(cfg, {})


@pytest.mark.parametrize("command", ["build", "run"])
def test_recorded_system_on_an_uncovered_benchmark_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, shared_data: Path
) -> None:
    """`cm-gym build --benchmark SQL --llm recorded:gpt-4-zero-shot` used to build 0 records, rc 0."""
    from cm_gym.cli import main

    out = tmp_path / "store.sqlite"
    args = ["--benchmark", "SQL", "--llm", "recorded:gpt-4-zero-shot"]
    argv = (
        [command, *args, "--out", str(out)]
        if command == "build"
        else [command, *args, "--out-dir", str(tmp_path / "r")]
    )
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "published output" in err, err
    assert not out.exists() and not (tmp_path / "r" / "results.json").exists()
