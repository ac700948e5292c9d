"""Simulator profiles: ``simulated:<profile>`` parsing, the default kept bit-identical, the
profile in the response-cache identity, and refusals."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cm_gym.agent import BaseAgent, Cost
from cm_gym.core.types import AgentState
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import LLMError
from cm_gym.llm.factory import make_llm
from cm_gym.llm.profiles import (
    Profile,
    load_profile,
    profile_names,
    profiles_for,
    task_multiplier,
    with_difficulty,
)
from cm_gym.llm.simulated import SimulatedLLM

#: sha256 of the first drafts (failed_attempts 0 / react and 2 / reflexion, LLM seeds 0 and 3) of
#: the first 150 SQL, 60 SAT, 60 SMT and 40 Code generated tasks, computed with main's simulator
#: (6105a2c) before profiles existed: plain "simulated" must keep drafting exactly this.
DEFAULT_DRAFTS_SHA256 = "41ac0e37ba619dd3c157c10b17a0bd7f80907267c26a9625a0eb7c83a36f7a04"
SIZES = (("SQL", 150), ("SAT", 60), ("SMT", 60), ("Code", 40))


def _drafts_digest(spec: str) -> str:
    h = hashlib.sha256()
    for bench, n in SIZES:
        tasks = get_benchmark(bench).load(None)[:n]
        for seed in (0, 3):
            llm = make_llm(spec, seed=seed)
            assert isinstance(llm, SimulatedLLM)
            for task in tasks:
                for failed, agent in ((0, "react"), (2, "reflexion")):
                    h.update(llm.draft_action(task, failed, agent).encode())
                    h.update(b"\x1f")
    return h.hexdigest()


@pytest.mark.slow
def test_plain_and_default_simulated_draft_exactly_as_before() -> None:
    assert _drafts_digest("simulated") == DEFAULT_DRAFTS_SHA256
    assert _drafts_digest("simulated:default") == DEFAULT_DRAFTS_SHA256


def test_spec_parsing_and_cache_identity() -> None:
    plain, default = make_llm("simulated", seed=2), make_llm("simulated:default", seed=2)
    assert isinstance(plain, SimulatedLLM) and plain.profile is None and default.profile is None  # type: ignore[attr-defined]
    assert plain.cache_identity() == {"backend": "simulated", "version": "2", "seed": 2}  # type: ignore[attr-defined]
    assert default.cache_identity() == plain.cache_identity()  # type: ignore[attr-defined]
    fitted = make_llm("simulated:gpt-4-zero-shot", seed=2)
    assert isinstance(fitted, SimulatedLLM) and fitted.profile is not None
    assert fitted.profile.domain == "sql" and fitted.profile.params["rates"]
    identity = fitted.cache_identity()
    assert identity["profile"]["name"] == "gpt-4-zero-shot" and len(identity["profile"]["digest"]) == 16
    assert "gpt-4-zero-shot" in profile_names() and "default" in profile_names()
    assert "gpt-4-zero-shot" in profiles_for("sql")
    with pytest.raises(LLMError, match="unknown simulator profile 'gpt-5'.*known: default"):
        make_llm("simulated:gpt-5")
    with pytest.raises(LLMError, match="unknown simulator profile"):
        load_profile("../../etc/passwd")


def test_each_shipped_profile_builds_its_model_and_documents_its_fit() -> None:
    for name in profile_names()[1:]:
        profile = load_profile(name)
        assert profile is not None
        model = profile.error_model(profile.domain)
        assert model.operators and all(0.0 <= v <= 0.95 for v in profile.params["rates"].values())
        meta = profile.meta
        assert meta["fitted_to"]["system"] == name and "TV" in meta["distance"]
        assert meta["after"]["tv"] < meta["before"]["tv"], f"{name}: the fit did not get closer"


def test_a_profile_refuses_another_domain() -> None:
    task = get_benchmark("SAT").load(None)[0]
    llm = SimulatedLLM(seed=0, profile="gpt-4-zero-shot")
    with pytest.raises(LLMError, match="fitted to the 'sql' domain, not 'sat'"):
        llm.draft_action(task)


def test_profiles_change_drafts_and_never_share_cached_replies(tmp_path: Path) -> None:
    tasks = get_benchmark("SQL").load(None)[:80]
    plain, fitted = SimulatedLLM(seed=0), SimulatedLLM(seed=0, profile="gpt-4-zero-shot")
    changed = [t for t in tasks if plain.draft_action(t) != fitted.draft_action(t)]
    assert changed  # the fitted slips and rates draft differently
    path = tmp_path / "responses.sqlite"
    task = changed[0]
    domain = get_domain("sql")

    def draft(llm: object) -> str:
        return BaseAgent(llm, domain, domain.make_evaluator()).draft(AgentState(task), Cost())  # type: ignore[arg-type]

    replies = [draft(CachedLLM(llm, ResponseCache(path, "rw"))) for llm in (plain, fitted)]
    assert replies == [plain.draft_action(task), fitted.draft_action(task)]
    assert replies[0] != replies[1]  # the second profile did not get the first one's cached reply
    again = CachedLLM(SimulatedLLM(seed=0, profile="gpt-4-zero-shot"), ResponseCache(path, "ro"))
    assert draft(again) == replies[1]  # replayed from the cache (read-only: a miss would raise)


def test_an_in_memory_profile_needs_no_file() -> None:
    profile = Profile("trial", "sql", "cm_gym.domains.sql.errormodel_profiles:profile_error_model",
                      {"rates": {"extra_column": 0.95}})  # fmt: skip
    llm = SimulatedLLM(seed=0, profile=profile)
    task = next(t for t in get_benchmark("SQL").load(None) if t.reference.upper().startswith("SELECT "))
    assert llm.draft_action(task) != task.reference
    bad = Profile("bad", "sql", "cm_gym.nowhere:nothing", {})
    with pytest.raises(LLMError, match="cannot load its builder"):
        SimulatedLLM(seed=0, profile=bad).draft_action(task)


def test_difficulty_concentrates_slips_on_a_stable_hard_share() -> None:
    ids = [f"task-{i}" for i in range(4000)]
    mult = [task_multiplier(t, 0.25, 0.85) for t in ids]
    hard = [m for m in mult if m > 1]
    assert abs(len(hard) / len(ids) - 0.25) < 0.03 and abs(sum(mult) / len(ids) - 1.0) < 0.06
    assert hard[0] == pytest.approx(0.85 / 0.25) and min(mult) == pytest.approx(0.15 / 0.75)
    assert task_multiplier("task-7", 0.25, 0.85) == task_multiplier("task-7", 0.25, 0.85)  # stable
    base = Profile("p", "sql", "cm_gym.domains.sql.errormodel_profiles:profile_error_model",
                   {"rates": {"extra_column": 0.2}})  # fmt: skip
    hardened = Profile(
        base.name, base.domain, base.builder, {**base.params, "difficulty": {"share": 0.25, "mass": 0.85}}
    )
    task = next(t for t in get_benchmark("SQL").load(None) if t.reference.upper().startswith("SELECT "))
    p0 = next(op for op in base.error_model("sql").operators if op.name == "extra_column")
    p1 = next(op for op in hardened.error_model("sql").operators if op.name == "extra_column")
    assert p0.probability(task) == pytest.approx(0.2)
    assert p1.probability(task) == pytest.approx(
        min(0.95, p0.probability(task) * task_multiplier(task.task_id, 0.25, 0.85))
    )
    assert base.digest() != hardened.digest()
    with pytest.raises(LLMError, match="difficulty needs"):
        with_difficulty(base.error_model("sql"), 0.5, 0.2)
