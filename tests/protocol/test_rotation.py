"""Split rotation (``split_seeds``): one protocol run per split seed, pooled exactly, the rotation
recorded; SpiderSQL's held-out databases change with the split seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.envs.metrics import seed_averaged
from cm_gym.protocol import ProtocolConfig, ProtocolError, evaluate_all, prepare, run_protocol


def _cfg(out: Path, **kw: object) -> ProtocolConfig:
    base: dict = dict(benchmark="SQL", out_dir=out, seeds=(0, 1), n_build=12, n_train=8, n_eval=10,
                      policies=("none", "top1", "random"), tensorboard=False, progress=False)  # fmt: skip
    base.update(kw)
    return ProtocolConfig(**base)


@pytest.mark.slow
def test_rotation_runs_each_split_and_pools_exactly(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path / "rot", split_seeds=(3, 4))
    pooled = run_protocol(cfg)
    on_disk = json.loads((tmp_path / "rot" / "results.json").read_text())
    assert on_disk["rotation"]["split_seeds"] == [3, 4] and on_disk["split"]["eval"] == 20
    parts = {s: json.loads((tmp_path / "rot" / f"split-{s}" / "results.json").read_text()) for s in (3, 4)}
    assert parts[3]["config"]["split_seed"] == 3 and parts[4]["config"]["split_seed"] == 4
    for name in ("none", "top1", "random"):
        res = pooled["policies"][name]
        for i in range(2):  # per selector seed: the pooled score is the task-weighted mean of the splits'
            scores = [parts[s]["policies"][name]["per_seed"][i] for s in (3, 4)]
            expect = sum(p["score"] * p["n_tasks"] for p in scores) / sum(p["n_tasks"] for p in scores)
            assert (
                res["per_seed"][i]["score"] == pytest.approx(expect) and res["per_seed"][i]["n_tasks"] == 20
            )
        units = seed_averaged(res["per_task_scores"])
        assert len(units) == 20 and all(k.startswith(("split3/", "split4/")) for k in units)
        assert res["per_split"][3] == pytest.approx(parts[3]["policies"][name]["mean"]["score"]["mean"])
    ci = pooled["policies"]["random"]["paired_ci"]["vs_top1"]
    two = pooled["policies"]["random"]["paired_ci_two_level"]["vs_top1"]
    assert ci["n_tasks"] == 20 and two["n_tasks"] == 20 and two["n_seeds"] == 2
    assert two["diff"] == pytest.approx(ci["diff"])


def test_rotation_refusals(tmp_path: Path) -> None:
    with pytest.raises(ProtocolError, match="split_seeds must be distinct"):
        _cfg(tmp_path, split_seeds=(1, 1)).validate()
    with pytest.raises(ProtocolError, match="non-negative"):
        _cfg(tmp_path, split_seeds=(-1,)).validate()
    snap = tmp_path / "s.sqlite"
    snap.write_text("x")
    with pytest.raises(ProtocolError, match="belongs to one split"):
        _cfg(tmp_path, split_seeds=(0, 1), store=snap).validate()
    with pytest.raises(ProtocolError, match="split rotation"):
        evaluate_all(_cfg(tmp_path, split_seeds=(0, 1)), {})


@pytest.mark.data
def test_spider_rotation_changes_the_held_out_databases(shared_data: Path, tmp_path: Path) -> None:
    held = []
    for seed in (0, 1, 2):
        prepared = prepare(
            _cfg(tmp_path, benchmark="SpiderSQL", split_seed=seed, n_build=None, n_train=None, n_eval=None,
                 split_by="databases")  # the "new environment" condition; the default splits tasks
        )  # fmt: skip
        held.append({prepared.tasks[t].env_id for t in prepared.split.eval})
        build_envs = {prepared.tasks[t].env_id for t in prepared.split.build}
        assert not held[-1] & build_envs  # split by database
    assert len(set.union(*held)) > max(len(h) for h in held)  # rotation reaches other databases
