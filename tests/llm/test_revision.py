"""The simulated revision with one record: branch rates, candidate sets and rates files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.core.types import AgentState, Task
from cm_gym.domains.base import RevisionRates
from cm_gym.domains.registry import get_domain
from cm_gym.llm.revision import (
    RevisionRatesError,
    candidates,
    load_revision_rates,
    save_revision_rates,
)
from cm_gym.llm.simulated import SimulatedLLM

DRAFT = "SELECT name FROM users WHERE age >= 30 ORDER BY name"
MATCH = RecordView("rec-m", "Situation: boundary", a_minus="age >= 30", a_plus="age > 30")
UNRELATED = RecordView("rec-u", "Situation: limit", a_minus="LIMIT 5", a_plus="LIMIT 6")


def _revisions(llm: SimulatedLLM, task: Task, record: RecordView, n: int = 40) -> list[str]:
    domain = get_domain(task.domain)
    agent = BaseAgent(llm, domain, domain.make_evaluator())
    out = []
    for i in range(n):  # a different rendered prompt each time: a fresh draw
        state = AgentState(task).with_reflection(f"note {i}")
        out.append(agent.revise(state, DRAFT, record, Cost()))
    return out


def _rates_file(tmp_path: Path, **rates: float) -> Path:
    return save_revision_rates(tmp_path / "rates.json", {"llmtoy": RevisionRates(**rates)}, source="test")


def test_rates_file_round_trip_and_refusals(tmp_path: Path) -> None:
    path = _rates_file(tmp_path, apply=0.5, match_disturb=0.2)
    loaded = load_revision_rates(path)
    assert loaded["llmtoy"] == RevisionRates(apply=0.5, match_disturb=0.2)
    assert json.loads(path.read_text())["source"] == "test"
    with pytest.raises(RevisionRatesError, match="does not exist"):
        load_revision_rates(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(RevisionRatesError, match="not a readable"):
        load_revision_rates(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"domains": {}}))
    with pytest.raises(RevisionRatesError, match="not a cm_gym revision-rates file"):
        load_revision_rates(tmp_path / "other.json")
    data = json.loads(path.read_text())
    data["domains"]["llmtoy"]["sparkle"] = 1.0
    (tmp_path / "unknown.json").write_text(json.dumps(data))
    with pytest.raises(RevisionRatesError, match="sparkle"):
        load_revision_rates(tmp_path / "unknown.json")
    data["domains"]["llmtoy"] = {"apply": 1.5}
    (tmp_path / "range.json").write_text(json.dumps(data))
    with pytest.raises(RevisionRatesError, match=r"\[0, 1\]"):
        load_revision_rates(tmp_path / "range.json")


def test_revisions_follow_the_loaded_rates(toy: list[Task], tmp_path: Path) -> None:
    task = next(t for t in toy if t.features["boundary"] == "strict")
    domain = get_domain(task.domain)
    blind = Task(task.task_id, task.domain, task.prompt, task.env_id, "", features=task.features)
    applied = domain.apply_contrast(blind, DRAFT, MATCH.a_minus, MATCH.a_plus)
    always = SimulatedLLM(revision_rates=_rates_file(tmp_path, apply=1.0, match_disturb=0.0))
    assert set(_revisions(always, task, MATCH)) == {applied}
    never = SimulatedLLM(revision_rates=_rates_file(tmp_path, apply=0.0, match_disturb=0.0))
    assert set(_revisions(never, task, MATCH)) == {DRAFT}
    disturb = SimulatedLLM(revision_rates=_rates_file(tmp_path, unrelated_disturb=1.0))
    cands = candidates(domain, blind, DRAFT, UNRELATED.a_minus, UNRELATED.a_plus)
    assert cands.closeness == "unrelated" and cands.disturb
    got = set(_revisions(disturb, task, UNRELATED))
    assert got <= set(cands.disturb) and len(got) > 1  # a seeded choice among the disturbances
    assert task.reference not in got
    assert always.cache_identity() != never.cache_identity() != SimulatedLLM().cache_identity()


def test_default_rates_mix_branches_at_their_frequency(toy: list[Task]) -> None:
    """The llmtoy error model applies a matching record with probability 0.8, else ignores it."""
    task = next(t for t in toy if t.features["boundary"] == "strict")
    revised = _revisions(SimulatedLLM(seed=0), task, MATCH, n=80)
    share = sum(r != DRAFT for r in revised) / len(revised)
    assert 0.65 <= share <= 0.93 and set(revised) == {DRAFT, DRAFT.replace("age >= 30", "age > 30")}


TABLE = RecordView("rec-t", "Situation: table", a_minus="FROM users", a_plus="FROM members")


def _pair_revisions(llm: SimulatedLLM, task: Task, draft: str, n: int = 30) -> list[str]:
    domain = get_domain(task.domain)
    agent = BaseAgent(llm, domain, domain.make_evaluator())
    return [
        agent.revise_with_records(AgentState(task).with_reflection(f"n{i}"), draft, [MATCH, TABLE], Cost())
        for i in range(n)
    ]


def test_two_records_are_treated_as_two_one_record_revisions(toy: list[Task], tmp_path: Path) -> None:
    """REVISE_WITH_RECORDS: each record as one REVISE_WITH_RECORD would treat it, in order, on
    the draft the previous one left (no new rate: the one-record rates, independently)."""
    task = next(t for t in toy if t.features["boundary"] == "strict")
    domain = get_domain(task.domain)
    blind = Task(task.task_id, task.domain, task.prompt, task.env_id, "", features=task.features)
    first = domain.apply_contrast(blind, DRAFT, MATCH.a_minus, MATCH.a_plus)
    both = domain.apply_contrast(blind, first, TABLE.a_minus, TABLE.a_plus)
    assert first not in (None, DRAFT) and both not in (None, first)
    always = SimulatedLLM(revision_rates=_rates_file(tmp_path, apply=1.0))
    assert set(_pair_revisions(always, task, DRAFT)) == {both}
    never = SimulatedLLM(revision_rates=_rates_file(tmp_path, apply=0.0))
    assert set(_pair_revisions(never, task, DRAFT)) == {DRAFT}
    mixed = _pair_revisions(SimulatedLLM(seed=0), task, DRAFT, n=120)
    share_both = sum(r == both for r in mixed) / len(mixed)
    assert 0.45 <= share_both <= 0.82  # ≈ 0.8² under llmtoy's one-record apply rate of 0.8
    assert set(mixed) <= {DRAFT, first, both, DRAFT.replace("users", "members")}
    with pytest.raises(ValueError, match="exactly two"):
        BaseAgent(always, domain, domain.make_evaluator()).revise_with_records(
            AgentState(task), DRAFT, [MATCH], Cost()
        )
