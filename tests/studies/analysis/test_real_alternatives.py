"""Real alternatives in Module I (issue 32 item 4b) and admission on several database instances,
on GPT-4 zero-shot's real Spider drafts: other systems' outputs become candidates marked
"recorded", records can be formed from them, and accidental repairs are refused on variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.core.types import AgentState, Task
from cm_gym.domains.registry import get_domain
from cm_gym.llm.recordings import load_recordings
from cm_gym.memory.alternatives import AlternativeGenerator, recorded_alternatives
from cm_gym.studies.analysis.real_memory import construct_from_recorded
from cm_gym.studies.analysis.real_repairs import spider_tasks

pytestmark = pytest.mark.data


def _tasks(db: str) -> list[Task]:
    return [t for t in spider_tasks() if t.env_id == db]


def test_recorded_alternatives_are_the_other_systems_outputs(shared_data: Path) -> None:
    domain = get_domain("sql")
    task = _tasks("pets_1")[0]
    provide = recorded_alternatives(domain, "spider", "gpt-4-zero-shot")
    texts = provide(task, "SELECT 1")
    rows = load_recordings("spider")
    expected = [domain.parse_action(rows.get(domain.recording_key(task), s).text)
                for s in rows.systems if s != "gpt-4-zero-shot"]  # fmt: skip
    assert texts == expected and len(texts) == 6
    from cm_gym.agent import Cost
    from cm_gym.core.types import Outcome

    gen = AlternativeGenerator(None, domain, 4, recorded=provide)
    alts = gen.generate(AgentState(task), "SELECT 1", Outcome(0.0, False), Cost())
    assert alts and alts[0].source == "recorded" and alts[0].text == texts[0]
    plain = AlternativeGenerator(None, domain, 4).generate(
        AgentState(task), "SELECT 1", Outcome(0.0, False), Cost()
    )
    assert all(a.source != "recorded" for a in plain)


def test_construction_with_real_alternatives_and_several_instances(shared_data: Path, tmp_path: Path) -> None:
    from cm_gym.memory.snapshot import FrozenStore

    ids = [t.task_id for db in ("pets_1", "student_transcripts_tracking") for t in _tasks(db)]
    plain = construct_from_recorded("SpiderSQL", "gpt-4-zero-shot", tmp_path / "a", ids)
    real = construct_from_recorded(
        "SpiderSQL", "gpt-4-zero-shot", tmp_path / "b", ids, real_alternatives=True
    )
    strict = construct_from_recorded(
        "SpiderSQL", "gpt-4-zero-shot", tmp_path / "c", ids, real_alternatives=True,
        evaluator_options={"instances": 10, "instance_dir": str(tmp_path / "v")},
    )  # fmt: skip
    assert real.repaired > plain.repaired  # other systems' outputs repair failures the grammar cannot
    assert "refused_on_instances" not in real.rejected and "refused_on_instances" not in plain.rejected
    assert strict.rejected.get("refused_on_instances", 0) > 0 and len(strict.records) < len(real.records)
    domain = get_domain("sql")
    provide = recorded_alternatives(domain, "spider", "gpt-4-zero-shot")
    tasks = {t.task_id: t for db in ("pets_1", "student_transcripts_tracking") for t in _tasks(db)}
    records = list(FrozenStore.open(real.snapshot).records)
    assert any(r.a_plus in provide(tasks[r.source_task_id], r.a_minus) for r in records)  # real text as a⁺
