"""The protocol with ``llm="recorded:<system>"``: splits restricted to recorded tasks (what was left
out reported), real vs simulated replies counted per phase and policy, printed by `cm-gym run`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cm_gym.cli.run import llm_line
from cm_gym.domains.registry import get_benchmark
from cm_gym.llm.recordings import spider_key
from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.protocol import ProtocolConfig, run_protocol
from cm_gym.protocol.stores import prepare

pytestmark = pytest.mark.slow
SYSTEM = "toy-recorded"


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProtocolConfig, dict[str, Any], set[str]]:
    """A data folder whose llm-outputs hold a 'published' output (the simulator's slipped draft,
    standing in for a real system) for four of every five generated SQL tasks."""
    root = tmp_path_factory.mktemp("data")
    tasks = get_benchmark("SQL").load()
    sim, rows, missing = SimulatedLLM(seed=1), [], set()
    for i, task in enumerate(tasks):
        if i % 5 == 4:
            missing.add(task.task_id)
            continue
        rows.append({"db_id": task.env_id, "question": task.prompt, "gold": task.reference,
                     "predictions": {SYSTEM: sim.draft_action(task)}, "execution": {}})  # fmt: skip
    keys = {spider_key(r["db_id"], r["question"]) for r in rows}
    assert len(keys) == len(rows)  # every generated task has its own key
    out = root / "llm-outputs" / "spider" / "predictions.jsonl"
    out.parent.mkdir(parents=True)
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv("CM_GYM_DATA", str(root))
    cfg = ProtocolConfig(
        benchmark="SQL", out_dir=root / "run", seeds=(0,), total_decisions=40, checkpoint_every=20,
        n_build=30, n_train=12, n_eval=12, obs_layouts=("paper",), tensorboard=False, progress=False,
        llm=f"recorded:{SYSTEM}",
    )  # fmt: skip
    try:
        yield cfg, run_protocol(cfg), missing
    finally:
        mp.undo()


def test_splits_keep_only_recorded_tasks_and_report_the_rest(recorded_run: Any) -> None:
    cfg, results, missing = recorded_run
    prepared = prepare(cfg)
    used = set(prepared.split.build) | set(prepared.split.train) | set(prepared.split.eval)
    assert used and not used & missing
    excluded = results["recorded"]["excluded"]
    assert sum(excluded.values()) > 0 and set(results["recorded"]["excluded_ids"]["eval"]) <= missing
    assert results["recorded"]["system"] == SYSTEM and results["recorded"]["ladder"] == [SYSTEM]


def test_real_and_simulated_replies_are_counted_per_phase_and_policy(recorded_run: Any) -> None:
    _, results, _ = recorded_run
    replies = results["llm"]["replies"]
    assert replies["real"] > 0 and replies["real_by_system"] == {SYSTEM: replies["real"]}
    assert replies["by_template"]["DRAFT_ACTION"]["simulated"] == 0  # every draft is a real one
    phases = results["llm"]["replies_by_phase"]
    assert set(phases) == {"build", "train", "evaluate"}
    assert sum(p["real"] for p in phases.values()) == replies["real"]
    assert sum(p["simulated"] for p in phases.values()) == replies["simulated"]
    none, top1 = results["policies"]["none"]["replies"], results["policies"]["top1"]["replies"]
    assert none["real"] > 0 and "REVISE_WITH_RECORD" not in none["by_template"]  # None never revises
    assert top1["by_template"].get("REVISE_WITH_RECORD", {"real": 0})["real"] == 0
    line = llm_line(results["llm"])
    assert f"{replies['real']:,} real ({SYSTEM}" in line and f"{replies['simulated']:,} simulated" in line
