"""The real-repairs analysis (issue 32 bench) on two Spider databases of GPT-4 zero-shot's real
drafts: failures, repairs by source, and the accidental ones refused on database variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.domains.registry import get_domain
from cm_gym.studies.analysis.real_repairs import spider_tasks, system_repairs

pytestmark = pytest.mark.data


def test_gpt4_zero_shot_repairs_on_two_databases(shared_data: Path, tmp_path: Path) -> None:
    tasks = [t for t in spider_tasks() if t.env_id in ("pets_1", "student_transcripts_tracking")]
    ev = get_domain("sql").make_evaluator(instances=3, instance_dir=str(tmp_path / "v"))
    others = ("gpt-4-zero-shot", "gpt-4-din-sql", "codex-din-sql")
    r = system_repairs("gpt-4-zero-shot", tasks, ev, systems=others)
    assert r.drafts == len(tasks) and r.failures == r.drafts - r.solved_one > 0
    assert r.solved_several <= r.solved_one
    assert r.admitted_several <= r.admitted_one <= r.failures
    assert {p.source for p in r.pairs} <= {"base", "new", "recorded"} and r.repaired["recorded"] > 0
    refused = {(p.task_id, p.kind) for p in r.pairs if not p.confirmed}
    timmothy = {t.task_id for t in tasks if "Timmothy" in t.prompt}
    assert any((tid, "cmp:EQ->NEQ") in refused for tid in timmothy)  # <> 'Timmothy': lucky on one instance
    assert all(p.confirmed for p in r.pairs if p.kind == "distinct:add")  # the real missing DISTINCTs
    assert r.as_dict()["refused"]["all"] == r.refused() >= len(refused)
