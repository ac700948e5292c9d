"""The experiment runner: units cached by configuration, recomputed only when something changed,
failures reported by unit, a killed unit never mistaken for a finished one, a local process pool
giving the same results as the serial backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.studies.experiments import ExperimentConfig
from cm_gym.studies.experiments.plan import Planner
from cm_gym.studies.experiments.runner import (
    ExperimentError,
    ProcessPoolBackend,
    Runner,
    Unit,
    execute_unit,
    unit_dir,
    unit_kind,
)
from cm_gym.studies.experiments.stats import mean_ci, paired_ci, per_task

CALLS: list[dict] = []


@unit_kind("test_echo")
def _echo(params, inputs, workdir: Path) -> dict:
    CALLS.append(dict(params))
    if params.get("fail"):
        raise ValueError("boom")
    (workdir / "artefact.txt").write_text(str(params["x"]))
    total = params["x"] + sum(r["total"] for r in inputs.values())
    return {"total": total, "artefact": "artefact.txt"}


def test_units_are_cached_by_configuration(tmp_path: Path) -> None:
    CALLS.clear()
    runner = Runner(tmp_path, progress=False)
    leaf = Unit("test_echo", {"x": 1})
    top = Unit("test_echo", {"x": 10}, {"a": leaf})
    (result,) = runner.run([top])
    assert result["total"] == 11 and result.path("artefact").read_text() == "10"
    assert len(CALLS) == 2
    # a rerun (new runner, same folder) recomputes nothing; a changed parameter recomputes that
    # unit and what depends on it, never the unchanged input
    again = Runner(tmp_path, progress=False)
    assert again.run([top])[0]["total"] == 11 and again.computed == 0 and len(CALLS) == 2
    changed = Unit("test_echo", {"x": 10}, {"a": Unit("test_echo", {"x": 2})})
    assert again.run([changed, top])[0]["total"] == 12
    assert [c["x"] for c in CALLS[2:]] == [2, 10]
    assert (
        leaf.key != Unit("test_echo", {"x": 2}).key
        and leaf.key == Unit("test_echo", {"x": 1}, label="renamed").key
    )


def test_a_failed_unit_names_itself_and_leaves_nothing_behind(tmp_path: Path) -> None:
    bad = Unit("test_echo", {"x": 1, "fail": True}, label="the bad one")
    with pytest.raises(ExperimentError, match="the bad one failed: boom"):
        Runner(tmp_path, progress=False).run([bad])
    parent = unit_dir(tmp_path, bad).parent
    assert not any(parent.iterdir())  # no partial folder that could look finished


def test_an_unfinished_unit_is_recomputed(tmp_path: Path) -> None:
    unit = Unit("test_echo", {"x": 5})
    directory = unit_dir(tmp_path, unit)
    directory.mkdir(parents=True)
    (directory / "result.json").write_text("{truncated")
    assert execute_unit(unit, {}, str(tmp_path))["total"] == 5
    assert json.loads((directory / "result.json").read_text())["total"] == 5


def test_unknown_unit_kind_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="unknown unit kind"):
        Runner(tmp_path, progress=False).run([Unit("no_such_kind", {})])


@pytest.mark.slow
def test_process_pool_matches_serial(tmp_path: Path) -> None:
    """Two real evaluation units in a 2-process pool give the serial runner's episodes."""
    cfg = ExperimentConfig.make(quick=True, results_dir=tmp_path / "pool", progress=False)
    plan = Planner(cfg)
    ids = list(plan.split("SQL").eval[:6])
    units = [
        plan.mechanism_eval("SQL", "react", "none", task_ids=ids),
        plan.mechanism_eval("SQL", "react", "best_of_n", task_ids=ids),
    ]
    pool = Runner(tmp_path / "pool", ProcessPoolBackend(2), progress=False)
    try:
        pooled = pool.run(units)
    finally:
        pool.close()
    serial = Runner(tmp_path / "serial", progress=False).run(units)
    for a, b in zip(pooled, serial, strict=True):
        assert a["episodes"] == b["episodes"]


def test_bootstrap_intervals() -> None:
    base = {f"t{i}": float(i % 2) for i in range(40)}
    assert paired_ci(base, base).value == 0 and paired_ci(base, base).hi == 0
    better = {t: v + 1.0 for t, v in base.items()}
    est = paired_ci(base, better)
    assert est.value == pytest.approx(1.0) and est.lo == pytest.approx(1.0) and est.excludes_zero
    noisy = mean_ci(base, resamples=500)
    assert noisy.lo < 0.5 < noisy.hi and noisy.n == 40
    runs = [
        [{"task_id": "a", "score": 1.0}, {"task_id": "b", "score": 0.0}],
        [{"task_id": "a", "score": 0.0}],
    ]
    assert per_task(runs, "score", 100) == {"a": 50.0, "b": 0.0}


def test_evaluator_options_key_the_units_and_reach_the_evaluator() -> None:
    from cm_gym.cli.experiment import parse_evaluator_options
    from cm_gym.studies.experiments.runner import ExperimentError
    from cm_gym.studies.experiments.units import context

    plain = Planner(ExperimentConfig.make(quick=True)).base("SAT", "react")
    cfg = ExperimentConfig.make(quick=True, evaluator_options={"conflict_budget": 7})
    budgeted = Planner(cfg).base("SAT", "react")
    assert "evaluator" not in plain  # default unit keys stay as they were
    assert Unit("store", plain).key != Unit("store", budgeted).key
    assert cfg.describe()["evaluator_options"] == {"conflict_budget": 7}
    assert context(budgeted).evaluator.encoding_config.budget == 7
    assert context(plain).evaluator.encoding_config.budget != 7
    assert parse_evaluator_options(["conflict_budget=7"], ["SAT"]) == ({"conflict_budget": 7}, ())
    with pytest.raises(ExperimentError, match="conflict_budget"):
        parse_evaluator_options(["conflict_budget=-1"], ["SAT"])  # a value the evaluator refuses
    with pytest.raises(ExperimentError, match="does not take"):
        parse_evaluator_options(["no_such_option=1"], ["SAT"])
    with pytest.raises(ExperimentError, match="KEY=VALUE"):
        parse_evaluator_options(["conflict_budget"], ["SAT"])


@pytest.mark.slow
def test_pool_workers_die_with_the_experiment(tmp_path: Path) -> None:
    """A killed experiment leaves no pool worker running units for nobody."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import os, sys, time\n"
        "from cm_gym.studies.experiments.runner import ProcessPoolBackend\n"
        "b = ProcessPoolBackend(1)\n"
        "print(b._pool.submit(os.getpid).result(), flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(child.stdout.readline())
        os.kill(worker, 0)  # alive while the experiment runs
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the pool worker outlived the experiment's process")
    finally:
        child.kill()
