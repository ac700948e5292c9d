"""The Ray backend of the experiment runner on a local two-node Ray cluster (conftest): units run
as Ray tasks and give the serial runner's results (real units: a store, evaluations), a killed
worker's unit is retried, a unit's own error names the unit, workers that share no disk with the
driver get inputs and the LLM cache through the object store and ship results back, and
`cm-gym experiment --backend ray --address` runs a study end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cm_gym.backends.ray import shipping
from cm_gym.studies.experiments import ExperimentConfig
from cm_gym.studies.experiments.plan import Planner
from cm_gym.studies.experiments.runner import ExperimentError, Runner, Unit, result_fingerprint, unit_dir

KINDS = ("tests.backends.ray.unit_kinds",)


def _backend(address: str, **kw):  # noqa: ANN202
    from cm_gym.backends.ray.experiments import RayBackend

    return RayBackend(address, imports=KINDS, **kw)


@pytest.mark.slow
def test_units_run_as_ray_tasks_a_killed_worker_is_retried_and_errors_name_the_unit(
    ray_address: str, tmp_path: Path
) -> None:
    import tests.backends.ray.unit_kinds  # noqa: F401 - the serial runner needs the kinds here too

    leaf = Unit("ray_test_sum", {"x": 1})
    middle = [Unit("ray_test_sum", {"x": 10 + i}, {"leaf": leaf}) for i in range(3)]
    top = Unit("ray_test_sum", {"x": 100}, {f"m{i}": m for i, m in enumerate(middle)})
    dies = Unit("ray_test_dies_once", {"marker": str(tmp_path / "attempts")})
    runner = Runner(tmp_path / "ray", _backend(ray_address), progress=False)
    try:
        total, retried = runner.run([top, dies])
        assert total["total"] == 100 + sum(11 + i for i in range(3)) and runner.computed == 6
        assert retried["attempts"] == 2 and (tmp_path / "attempts").read_text() == "2"
        # the killed attempt's private folder is gone; the finished unit is the only one
        assert [p.name for p in unit_dir(tmp_path / "ray", dies).parent.iterdir()] == [dies.key]
        with pytest.raises(ExperimentError, match=r"ray_test_fails:\w+ failed: the unit's own error"):
            runner.run([Unit("ray_test_fails", {})])
    finally:
        runner.close()
    pids = {r["pid"] for r in Runner(tmp_path / "ray", progress=False).run([leaf, *middle, top])}
    assert len(pids) >= 1  # computed in Ray workers, read back by a plain runner from one folder
    serial = Runner(tmp_path / "serial", progress=False).run([top])[0]
    assert serial["total"] == total["total"]


def _real_units(results: Path) -> list[Unit]:
    """A CounterMem store on 8 build tasks, its rule-based evaluation and a baseline's, on 5 tasks;
    the LLM (simulated) goes through a response-cache file, as a real endpoint always does."""
    cfg = ExperimentConfig.make(quick=True, results_dir=results, llm_cache=results / "llm.sqlite")
    plan = Planner(cfg)
    split = plan.split("SQL")
    store = plan.store("SQL", "react", build_ids=split.build[:8])
    ids = list(split.eval[:5])
    return [
        plan.countermem_eval("SQL", "react", store, policy="top1", task_ids=ids),
        plan.mechanism_eval("SQL", "react", "none", task_ids=ids),
        store,
    ]


@pytest.mark.slow
@pytest.mark.parametrize("ship", ["auto", "ship"])
def test_real_units_on_ray_match_the_serial_runner(ray_address: str, tmp_path: Path, ship: str) -> None:
    serial = Runner(tmp_path / "serial", progress=False).run(_real_units(tmp_path / "serial"))
    units = _real_units(tmp_path / "ray")
    runner = Runner(tmp_path / "ray", _backend(ray_address, ship=ship), progress=False)
    try:
        on_ray = runner.run(units)
    finally:
        runner.close()
    for a, b in zip(serial, on_ray, strict=True):
        assert result_fingerprint(a) == result_fingerprint(b)
        assert b.directory.is_relative_to(tmp_path / "ray")  # results land in the driver's folder
    snapshot = on_ray[2].path("snapshot")
    assert snapshot.read_bytes() == serial[2].path("snapshot").read_bytes()  # byte-identical store
    # every LLM reply a worker produced is in the driver's cache file, shipped or shared
    from cm_gym.llm.cache import ResponseCache

    with (
        ResponseCache(tmp_path / "serial" / "llm.sqlite", "ro") as a,
        ResponseCache(tmp_path / "ray" / "llm.sqlite", "ro") as b,
    ):
        assert len(a) > 0 and {r[0] for r in a.rows()} == {r[0] for r in b.rows()}
    scratch = shipping.scratch_root(shipping.results_token(tmp_path / "ray"))
    # shipped: the store unit was unpacked on the node as an input, the units themselves went back
    assert (scratch / "units" / "store").is_dir() == (ship == "ship")
    assert not list((scratch / "units").glob("evaluate/*"))
    shutil.rmtree(scratch, ignore_errors=True)


def test_shipped_folders_unpack_atomically_and_refuse_unsafe_members(tmp_path: Path) -> None:
    import io
    import tarfile

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "result.json").write_text("{}")
    (src / "sub" / "a.bin").write_bytes(b"\x00\x01")
    dest = shipping.unpack_dir(shipping.pack_dir(src), tmp_path / "dest")
    assert (dest / "sub" / "a.bin").read_bytes() == b"\x00\x01"
    (dest / "sub" / "a.bin").write_bytes(b"kept")  # a finished folder is never replaced
    shipping.unpack_dir(shipping.pack_dir(src), dest)
    assert (dest / "sub" / "a.bin").read_bytes() == b"kept"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(shipping.ShippingError, match="unsafe member"):
        shipping.unpack_dir(buf.getvalue(), tmp_path / "evil")
    with pytest.raises(shipping.ShippingError, match="corrupt"):
        shipping.unpack_dir(b"not a tar archive at all" * 40, tmp_path / "corrupt")
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "evil").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest", "src"]  # no partial folders left


@pytest.mark.slow
def test_experiment_command_runs_a_study_on_the_cluster(ray_address: str, tmp_path: Path) -> None:
    from cm_gym.cli import main

    out = tmp_path / "results"
    argv = ["experiment", "budget", "--quick", "--results", str(out), "--no-progress"]
    assert main([*argv, "--backend", "ray", "--address", ray_address]) == 0
    report = json.loads((out / "reports" / "budget" / "report.json").read_text())
    assert report["config"]["quick"] is True and report["tables"]
    assert (out / ".cm_gym-results-id").is_file() and not list(out.glob("units/*/*.partial-*"))


def test_address_without_the_ray_backend_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cm_gym.cli import main

    assert main(["experiment", "budget", "--quick", "--results", str(tmp_path), "--address", "auto"]) == 2
    assert "--address joins a Ray cluster: add --backend ray" in capsys.readouterr().err
