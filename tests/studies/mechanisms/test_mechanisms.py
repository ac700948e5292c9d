"""Memory mechanisms on the generated SQL benchmark with the simulated LLM and the real SQLite
world model: the shared loop matches the selector env, every mechanism builds, saves, reloads and
stays frozen, never shows a task its own memory, and each keeps its documented behaviour."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from cm_gym.agent import Cost
from cm_gym.agents.baselines import AlwaysSkip
from cm_gym.core.types import AgentState
from cm_gym.envs.selection import MemorySelectionEnv
from cm_gym.llm.base import BEST_OF_N_JUDGE, Completion
from cm_gym.memory.construction import UNVERIFIED_FEEDBACK, ConstructionConfig
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.protocol.training import run_episodes as env_episodes
from cm_gym.studies.mechanisms import MECHANISMS, CounterMem, MechanismContext, MechanismError, make_mechanism
from cm_gym.studies.mechanisms.base import DecisionContext
from cm_gym.studies.mechanisms.episode import run_task

KEYS = ("solved", "score", "tokens", "evaluator_calls", "failures", "decisions")
BUILT = ("expel", "generative_agents", "voyager", "memgpt", "reasoningbank")


def _same(a: list[dict], b: list[dict], keys: tuple[str, ...] = KEYS) -> None:
    assert [e["task_id"] for e in a] == [e["task_id"] for e in b]
    diffs = [(x["task_id"], k, x[k], y[k]) for x, y in zip(a, b, strict=True) for k in keys if x[k] != y[k]]
    assert not diffs, diffs[:5]


def test_shared_loop_matches_the_selector_env_without_memory(
    make_ctx: Callable, sql_split: tuple, tmp_path
) -> None:
    """The mechanisms' loop is the env's loop: "none" gives the env's always-skip episodes."""
    build, held_out = sql_split
    ctx = make_ctx("reflexion")
    cm = CounterMem(workdir=tmp_path, benchmark="SQL", construction=ConstructionConfig())
    cm.build(ctx, build[:10])
    env = MemorySelectionEnv(
        "SQL", store=str(cm.snapshot_path), tasks=held_out, agent="reflexion", task_order="sequential"
    )
    _same(
        env_episodes(env, AlwaysSkip(), [t.task_id for t in held_out]),
        make_mechanism("none").run_episodes(ctx, held_out),
    )


def test_countermem_guide_loop_matches_the_env(make_ctx: Callable, sql_split: tuple, tmp_path) -> None:
    """CounterMem's own `guide` (retrieval + z_t + policy) reproduces the env episode by episode."""
    build, held_out = sql_split
    ctx = make_ctx()
    cm = CounterMem(policy="top1", benchmark="SQL", workdir=tmp_path)
    cm.build(ctx, build)
    assert cm.build_info["records"] > 0 and cm.build_cost.tokens > 0
    via_env = cm.run_episodes(ctx, held_out)
    from cm_gym.studies.mechanisms.episode import run_episodes

    via_loop = run_episodes(cm, ctx, held_out)
    _same(
        via_env,
        via_loop,
        (*KEYS, "selected_uses", "retrieval_with_records", "retrieved_records", "memory_tokens"),
    )
    assert sum(e["selected_uses"] for e in via_env) > 0


@pytest.mark.parametrize("name", BUILT)
def test_built_mechanisms_save_reload_and_stay_frozen(
    name: str, make_ctx: Callable, sql_split: tuple
) -> None:
    build, held_out = sql_split
    ctx = make_ctx()
    m = make_mechanism(name)
    m.build(ctx, build)
    assert m.build_cost.tokens > 0 and m.build_cost.evaluator_calls >= len(build)
    state = json.loads(json.dumps(m.state_dict()))
    first = m.run_episodes(ctx, held_out[:12])
    assert m.state_dict() == state  # evaluation wrote nothing back
    again = make_mechanism(name)
    again.load_state_dict(state)
    _same(first, again.run_episodes(ctx, held_out[:12]), (*KEYS, "selected_uses", "memory_tokens"))
    assert sum(e["memory_tokens"] for e in first) > 0  # guidance was shown and paid for


@pytest.mark.parametrize("name", BUILT)
def test_a_task_never_sees_its_own_memory(name: str, make_ctx: Callable, sql_split: tuple) -> None:
    build, _ = sql_split
    ctx = make_ctx()
    m = make_mechanism(name)
    m.build(ctx, build[:20])
    for task in build[:20]:
        m.begin_task(task)
        state = AgentState(task)
        d = DecisionContext(task, state, ctx.agent.draft(state, Cost()), 0)
        guidance = m.guide(ctx, d, Cost())
        if guidance is not None:
            assert all(item.source_task_id != task.task_id for item in guidance.items)


class _Scripted:
    """A test double for the LLM: delegates to the simulator except for the judge's reply."""

    def __init__(self, inner: Any, judge_reply: str) -> None:
        self.inner, self.judge_reply, self.name, self.judged = inner, judge_reply, "scripted", 0

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        if template == BEST_OF_N_JUDGE:
            self.judged += 1
            return Completion(self.judge_reply, 10, 3)
        return self.inner.complete(template, fields)


def test_best_of_n_judge_falls_back_to_candidate_one_and_never_calls_the_checker(
    make_ctx: Callable, sql_split: tuple, caplog: pytest.LogCaptureFixture
) -> None:
    _, held_out = sql_split
    base = make_ctx()
    scripted = _Scripted(base.llm, "I cannot decide.")
    ctx = MechanismContext(base.domain, scripted, base.evaluator, sampler=base.sampler)  # type: ignore[arg-type]
    bon = make_mechanism("best_of_n")
    none = make_mechanism("none").run_episodes(base, held_out[:10])
    got = bon.run_episodes(ctx, held_out[:10])
    assert scripted.judged == sum(e["decisions"] for e in got)
    assert "falling back to 1" in caplog.text
    # candidate 1 is the memory-free draft: same outcomes as no memory, at several times the tokens
    _same(none, got, ("solved", "score", "evaluator_calls", "decisions"))
    assert all(
        e["evaluator_calls"] == e["decisions"] for e in got
    )  # one check per decision: the judge never verifies
    assert sum(e["tokens"] for e in got) > 3 * sum(e["tokens"] for e in none)


def test_wm_without_cf_checks_alternatives_and_stores_nothing(make_ctx: Callable, sql_split: tuple) -> None:
    _, held_out = sql_split
    ctx = make_ctx()
    m = make_mechanism("wm_without_cf")
    runs = [run_task(m, ctx, t) for t in held_out]
    assert m.state_dict() == {}
    assert sum(r.episode["verification_calls"] for r in runs) > 0
    for r in runs:
        assert r.episode["evaluator_calls"] >= r.episode["verification_calls"]
    none = [run_task(None, ctx, t).episode for t in held_out]
    assert sum(r.episode["solved"] for r in runs) >= sum(e["solved"] for e in none)


def test_reasoningbank_matts_buys_more_experience_per_task_and_budgets_stop_builds(
    make_ctx: Callable, sql_split: tuple
) -> None:
    build, _ = sql_split
    ctx = make_ctx()
    base, matts = make_mechanism("reasoningbank"), make_mechanism("reasoningbank", matts=3)
    base.build(ctx, build[:10])
    matts.build(ctx, build[:10])
    assert matts.build_cost.tokens > 2 * base.build_cost.tokens
    capped = make_mechanism("reasoningbank", matts=3, token_budget=base.build_cost.tokens)
    capped.build(ctx, build[:10])
    assert capped.build_info["tasks"] < 10
    assert capped.build_cost.tokens >= base.build_cost.tokens  # stops at the first task past the budget


def test_unverified_construction_stores_untested_advice(
    make_ctx: Callable, sql_split: tuple, tmp_path
) -> None:
    build, _ = sql_split
    ctx = make_ctx()
    cm = CounterMem(benchmark="SQL", workdir=tmp_path, construction=ConstructionConfig(verify=False))
    cm.build(ctx, build[:20])
    records = FrozenStore.open(cm.snapshot_path).records
    assert records and all(r.evidence["feedback_plus"] == UNVERIFIED_FEEDBACK for r in records)
    failed_first = sum(1 for t in build[:20] if ctx.agent.draft(AgentState(t), Cost()) != t.reference)
    assert len(records) <= 2 * failed_first


def test_make_mechanism_refuses_unknown_names_and_parameters() -> None:
    assert set(MECHANISMS) >= {
        "none",
        "best_of_n",
        "expel",
        "generative_agents",
        "voyager",
        "memgpt",
        "reasoningbank",
        "countermem",
    }
    with pytest.raises(MechanismError, match="unknown memory mechanism"):
        make_mechanism("remembrall")
    with pytest.raises(MechanismError, match="bad parameters"):
        make_mechanism("expel", n_insight=3)
    for cls in MECHANISMS.values():
        assert cls.source and cls.adapted, f"{cls.name} must cite its source and say what was adapted"


def test_mechanisms_run_against_a_real_endpoint(sql_tasks: dict, sql_split: tuple) -> None:
    """Every mechanism template travels through the real `openai` client to the local
    OpenAI-compatible server (string fields only) and gives the in-process episodes."""
    from cm_gym.domains.registry import get_domain
    from cm_gym.llm.openai_client import OpenAICompatibleLLM
    from cm_gym.llm.server import serve_in_thread
    from cm_gym.llm.simulated import SimulatedLLM

    build, held_out = sql_split
    server, url = serve_in_thread(SimulatedLLM(seed=5, task_lookup=sql_tasks), model_name="sim")
    try:
        domain = get_domain("sql")
        remote = MechanismContext(
            domain, OpenAICompatibleLLM(base_url=url, model="sim", api_key="EMPTY"), domain.make_evaluator()
        )
        local = MechanismContext(domain, SimulatedLLM(seed=5, task_lookup=sql_tasks), domain.make_evaluator())
        for name in ("expel", "generative_agents", "memgpt", "reasoningbank"):
            a, b = make_mechanism(name), make_mechanism(name)
            a.build(remote, build[:8])
            b.build(local, build[:8])
            assert a.state_dict() == b.state_dict(), name
            _same(
                a.run_episodes(remote, held_out[:5]),
                b.run_episodes(local, held_out[:5]),
                (*KEYS, "memory_tokens"),
            )
    finally:
        server.shutdown()
        server.server_close()
