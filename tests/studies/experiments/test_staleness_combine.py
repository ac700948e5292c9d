"""The measurements of the `staleness` and `combine` studies: re-verification against a rebuild
(confusion counts, precision and recall), harm by verdict, and the two-error task selection."""

from __future__ import annotations

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.registry import get_domain
from cm_gym.memory.record import Record
from cm_gym.studies.experiments import (
    EXTRA_STUDIES,
    STUDIES,
    ExperimentConfig,
    ExperimentError,
    run_experiments,
)
from cm_gym.studies.experiments.staleness_measure import agreement, harm_by_verdict, rebuild_truth


def _rec(source: str, a_minus: str, a_plus: str) -> Record:
    domain = get_domain("sql")
    return Record.create(
        domain="sql",
        source_task_id=source,
        env_id="hr",
        situation="s",
        a_minus=a_minus,
        a_plus=a_plus,
        evidence={},
        condition="",
        contrast_key=domain.contrast_key(a_minus, a_plus),
        delta=1.0,
    )


def test_rebuild_truth_and_agreement() -> None:
    domain = get_domain("sql")
    same = _rec("t1", "SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3")
    moved = _rec("t2", "SELECT a FROM t WHERE y > 3", "SELECT a FROM t WHERE y >= 3")
    gone = _rec("t3", "SELECT a FROM t WHERE z > 3", "SELECT a FROM t WHERE z >= 3")
    verified = [
        ["t9", "select a from t where x > 3", "SELECT a FROM t WHERE x >= 3"],  # same pair, another layout
        ["t2", "SELECT a FROM t WHERE y_v2 > 3", "SELECT a FROM t WHERE y_v2 >= 3"],  # same key, new text
    ]
    truth = rebuild_truth(domain, [same, moved, gone], verified)
    assert truth == {same.record_id: "holds", moved.record_id: "changed", gone.record_id: "gone"}
    statuses = {same.record_id: "valid", moved.record_id: "repairable", gone.record_id: "valid"}
    a = agreement(statuses, truth)
    assert a.detect_precision == 1.0 and a.detect_recall == 0.5  # the gone record was missed
    assert a.retire_precision is None and a.retire_recall == 0.0
    a = agreement({**statuses, gone.record_id: "stale", same.record_id: "stale"}, truth)
    assert a.detect_precision == pytest.approx(2 / 3) and a.retire_precision == 0.5 and a.retire_recall == 1.0
    assert a.counts["stale"] == {"holds": 1, "changed": 0, "gone": 1} and a.records == 3


def test_harm_by_verdict_counts_uses_below_the_draft() -> None:
    episodes = [
        {"use_log": [["r1", 0.0, 1.0], ["r1", 1.0, 0.0], ["r2", 0.0, None]]},
        {"use_log": [["r2+r1", 0.0, 1.0]]},
    ]
    got = harm_by_verdict(episodes, {"r1": "stale", "r2": "valid"})
    assert got["stale"] == {"uses": 2, "harmful": 1} and got["valid"] == {"uses": 1, "harmful": 0}
    assert got["other"] == {"uses": 1, "harmful": 1}


@pytest.mark.slow
def test_two_error_tasks_need_both_corrections() -> None:
    from cm_gym.domains.sql.twoerror import candidate_tasks
    from cm_gym.llm.simulated import SimulatedLLM
    from cm_gym.studies.experiments.units_change import two_error_tasks

    pool = candidate_tasks(60, seed=0)
    assert pool and all(t.task_id.startswith("sqltwo0-") for t in pool)
    chosen = two_error_tasks(pool, llm_seed=0, n=5)
    assert chosen
    llm, evaluator = SimulatedLLM(seed=0), get_domain("sql").make_evaluator()
    for task in chosen:
        assert len(llm.active_slips(task)) >= 2
        assert not evaluator.check(AgentState(task), Action(llm.draft_action(task))).solved
        assert evaluator.check(AgentState(task), Action(task.reference)).solved


def test_extra_studies_run_by_name_only(tmp_path: object) -> None:
    assert set(EXTRA_STUDIES) == {"staleness", "combine"} and not set(EXTRA_STUDIES) & set(STUDIES)
    with pytest.raises(ExperimentError, match="staleness"):
        run_experiments(["no_such_study"], ExperimentConfig.make(quick=True, results_dir=tmp_path))


@pytest.mark.slow
def test_staleness_study_end_to_end_on_a_code_change(tmp_path: object) -> None:
    """The whole study on one family at smoke size: reverify flags records, every flagged one is a
    decision the rebuild no longer reproduces, and the drift control is reported."""
    cfg = ExperimentConfig.make(
        quick=True, benchmarks=("Code",), results_dir=tmp_path, progress=False,
        extra={"families": ["signature_changed"]},
    )  # fmt: skip
    ((report, md),) = run_experiments(["staleness"], cfg).values()
    (row,) = report.data.values()
    counts = row["agreement"]["counts"]
    flagged = sum(sum(counts[s].values()) for s in ("repairable", "stale"))
    assert flagged > 0 and row["decision_agreement"]["detect_precision"] == 1.0
    assert row["drift_agreement"]["records"] == row["agreement"]["records"] - len(row["drift"])
    assert row["exposed"]["tasks"] >= 0 and "drift (unchanged env)" in md.read_text()
