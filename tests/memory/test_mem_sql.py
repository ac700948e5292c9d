"""Integration with the real SQL domain and the simulated LLM: a build on the generated benchmark
admits only corrections its world model verifies, with conditions in the SQL predicate grammar,
and retrieval over the frozen snapshot enforces those conditions."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("cm_gym.domains.sql")

from cm_gym.core.splits import make_split  # noqa: E402
from cm_gym.core.types import Action, AgentState  # noqa: E402
from cm_gym.domains.conditions import parse_condition  # noqa: E402
from cm_gym.domains.registry import get_benchmark, get_domain  # noqa: E402
from cm_gym.llm.simulated import SimulatedLLM  # noqa: E402
from cm_gym.memory.construction import ConstructionConfig, build_memory  # noqa: E402
from cm_gym.memory.retrieval import Retriever  # noqa: E402
from cm_gym.memory.store import RecordStore  # noqa: E402


@pytest.mark.slow
def test_sql_build_admits_verified_conditional_records(tmp_path: Path) -> None:
    spec = get_benchmark("SQL")
    domain = get_domain(spec.domain_name)
    tasks = list(spec.load_tasks())
    split = make_split(tasks, seed=12345, by_env=spec.split_by_env)
    by_id = {t.task_id: t for t in tasks}
    build = [by_id[i] for i in split.build[:60]]
    evaluator = domain.make_evaluator()
    with RecordStore(tmp_path / "sql.sqlite", domain=domain.name, benchmark="SQL") as store:
        summary = build_memory(domain, build, store, SimulatedLLM(seed=0), evaluator, ConstructionConfig())
        assert summary.tasks == 60 and summary.admitted == len(store) >= 1
        assert summary.verification_calls == summary.alternatives_checked > 0
        snap = store.freeze(tmp_path / "snap.sqlite")
    predicates = domain.condition_predicates()
    for r in snap.records:
        source = by_id[r.source_task_id]
        # the evidence is real: re-checking both actions on the source task reproduces the gain
        before = evaluator.check(AgentState(source), Action(r.a_minus)).score
        after = evaluator.check(AgentState(source), Action(r.a_plus)).score
        assert after - before > 0.05 and r.delta == pytest.approx(after - before)
        assert parse_condition(r.condition, predicates).text == r.condition  # canonical, parseable
        assert r.contrast_key and r.situation
    retriever = Retriever(snap, domain)
    ablated = Retriever(snap, domain, use_conditions=False)
    parsed = {r.record_id: parse_condition(r.condition, predicates) for r in snap.records}
    filtered_out = 0
    for t in (by_id[i] for i in split.eval[:80]):
        got = retriever.retrieve(t, AgentState(t).render())
        assert all(g.record.source_task_id != t.task_id for g in got)
        assert all(parsed[g.record.record_id].holds(t) for g in got)
        unconditioned = ablated.retrieve(t, AgentState(t).render())
        filtered_out += sum(not parsed[g.record.record_id].holds(t) for g in unconditioned)
    assert filtered_out > 0  # the ablation switch really lets inapplicable records through
