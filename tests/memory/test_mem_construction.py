"""Construction (Algorithm 1, lines 3–14): verified admission, separate verification accounting,
construction-time reuse, budgets, resumability, checkpoints, distillation fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from memfakes import FakeLLM, ToyDomain, ToyEvaluator, make_tasks

from cm_gym.llm.base import GENERATE_LOCAL_ALTERNATIVES, REVISE_WITH_RECORD
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.memory.store import RecordStore
from cm_gym.memory.summary import BuildSummary

INCL_COND = 'mentions_any("at least") AND toy_has_number()'


def build(store: RecordStore, n: int = 12, llm: FakeLLM | None = None, **cfg: object):
    domain, evaluator = ToyDomain(), ToyEvaluator()
    llm = llm or FakeLLM()
    summary = build_memory(domain, make_tasks(n), store, llm, evaluator, ConstructionConfig(**cfg))  # type: ignore[arg-type]
    return summary, llm, evaluator


def test_a_verified_boundary_correction_is_admitted(store: RecordStore) -> None:
    summary, _, _ = build(store, n=1)
    assert summary.admitted == 1 and len(store) == 1
    r = store.records[0]
    assert r.contrast_key == "cmp:GT->GTE" and r.condition == INCL_COND
    assert r.a_minus.endswith("age > 10") and r.a_plus.endswith("age >= 10")
    assert r.source_task_id == "mt-0000" and r.env_id == "db0" and r.delta == 1.0
    assert r.evidence["score_minus"] == 0.0 and r.evidence["score_plus"] == 1.0
    assert r.evidence["feedback_minus"] == "wrong rows" and r.admission_score == pytest.approx(1.0)
    assert r.situation.startswith("A numeric threshold")
    # the DISTINCT alternative was checked and rejected as not improving
    assert summary.rejected["not_improved"] >= 1


def test_verification_calls_are_counted_apart_from_solving_calls(store: RecordStore) -> None:
    summary, llm, evaluator = build(store, n=12)
    assert summary.solving_calls == summary.decisions
    assert summary.verification_calls == summary.alternatives_checked > 0
    # the memory-free drafts checked to label reuse are bookkeeping, counted apart from both
    assert summary.label_checks > 0
    assert evaluator.calls == summary.solving_calls + summary.verification_calls + summary.label_checks
    assert (
        summary.verification_llm_calls == llm.calls[GENERATE_LOCAL_ALTERNATIVES] + llm.calls["DISTIL_RECORD"]
    )
    assert summary.solving_llm_calls == llm.calls["DRAFT_ACTION"] + llm.calls[REVISE_WITH_RECORD]
    assert summary.verification_tokens > 0 and summary.solving_tokens > 0
    assert "verification" in summary.format()


def test_records_are_reused_during_construction_and_u_is_updated(store: RecordStore) -> None:
    summary, llm, _ = build(store, n=12)
    (r,) = store.records
    inclusive_later = 7  # tasks 2,3,5,6,8,9,11 are inclusive; 1,4,7,10 are strict
    assert r.uses == inclusive_later and r.helpful == inclusive_later and r.u > 0.9
    assert summary.reuse_labels == {"helpful": 7, "neutral": 0, "harmful": 0}
    assert llm.calls[REVISE_WITH_RECORD] == 7  # the condition kept it away from strict tasks
    assert summary.solved == 11 and summary.failures_expanded == 2  # only mt-0000 failed (twice)
    assert summary.rejected.get("duplicate") == 1  # its second failure re-found the same contrast


def test_reuse_policy_never_leaves_u_at_zero(store: RecordStore) -> None:
    summary, llm, _ = build(store, n=12, reuse_policy="never")
    assert llm.calls[REVISE_WITH_RECORD] == 0 and summary.reuse_uses == 0
    assert all(r.uses == 0 and r.u == 0.0 for r in store.records)
    # every inclusive task fails and is expanded at most twice
    assert summary.failures_expanded == 2 * 8
    # redundancy: two copies of the same key + condition are admitted, the rest are below τ
    assert len(store) == 2 and summary.rejected["below_tau"] >= 1


def test_verification_budget_and_max_expansions(store: RecordStore) -> None:
    summary, _, _ = build(store, n=12, reuse_policy="never", verification_budget=3)
    assert summary.verification_calls == summary.alternatives_checked == 3
    assert summary.budget_exhausted
    summary2, _, _ = build(store, n=14, reuse_policy="never", verification_budget=3)
    assert summary2.alternatives_checked == 0  # the budget is cumulative over resumed builds


def test_max_expansions_zero_and_k_zero_disable_verification(tmp_path: Path) -> None:
    for cfg in ({"max_expansions": 0}, {"K": 0}):
        with RecordStore(tmp_path / f"s{len(cfg)}{next(iter(cfg))}.sqlite", domain="memtoy") as s:
            summary, _, _ = build(s, n=4, **cfg)
            assert summary.verification_calls == 0 and len(s) == 0


def test_capacity_triggers_retention(store: RecordStore) -> None:
    summary, _, _ = build(store, n=12, reuse_policy="never", capacity=1)
    assert len(store) == 1
    assert summary.evicted + summary.rejected.get("retention", 0) >= 1
    assert store.capacity == 1


def test_resumable_build_skips_processed_tasks(tmp_path: Path) -> None:
    with RecordStore(tmp_path / "full.sqlite", domain="memtoy") as full:
        build(full, n=12)
        full_records = full.records
    with RecordStore(tmp_path / "resumed.sqlite", domain="memtoy") as part:
        first, _, _ = build(part, n=5)
        second, llm, _ = build(part, n=12)
        assert (first.tasks, second.tasks, second.skipped) == (5, 7, 5)
        assert part.processed_task_ids == {f"mt-{i:04d}" for i in range(12)}
        assert [(r.record_id, r.u, r.uses) for r in part.records] == [
            (r.record_id, r.u, r.uses) for r in full_records
        ]
        assert part.counters["tasks"] == 12 and part.counters["admitted"] == 1
        third, _, _ = build(part, n=12)
        assert third.tasks == 0 and third.skipped == 12 and third.decisions == 0
        # the whole build's counts come back from the cumulative counters (a resumed run's report)
        total = BuildSummary.from_counters(part.counters)
        for name in ("tasks", "decisions", "solved", "failures_expanded", "alternatives_checked", "admitted"):
            assert getattr(total, name) == getattr(first, name) + getattr(second, name), name
        assert total.rejected == {
            k: first.rejected.get(k, 0) + second.rejected.get(k, 0)
            for k in {*first.rejected, *second.rejected}
        }
        assert total.tasks == 12 and total.decisions > 0


def test_checkpoints_are_verified_snapshots(store: RecordStore, tmp_path: Path) -> None:
    summary = build_memory(
        ToyDomain(),
        make_tasks(12),
        store,
        FakeLLM(),
        ToyEvaluator(),
        ConstructionConfig(reuse_policy="never"),
        checkpoints=(0, 1, 5, 10, 200),
        checkpoint_dir=tmp_path / "ckpt",
    )
    names = sorted(p.name for p in (tmp_path / "ckpt").glob("*.sqlite"))
    assert names == [
        "checkpoint-0000.sqlite",
        "checkpoint-0001.sqlite",
        "checkpoint-0005.sqlite",
        "checkpoint-0010.sqlite",
    ]
    counts = [len(FrozenStore.open(tmp_path / "ckpt" / n)) for n in names]
    assert counts[0] == 0 and counts == sorted(counts) and counts[-1] >= 1
    assert [len(FrozenStore.open(tmp_path / "ckpt" / n).processed_task_ids) for n in names] == [0, 1, 5, 10]
    assert len(summary.checkpoints) == 4
    with pytest.raises(ValueError, match="checkpoint_dir"):
        build_memory(ToyDomain(), make_tasks(1), store, FakeLLM(), ToyEvaluator(), checkpoints=(5,))


def test_distillation_fallbacks(tmp_path: Path) -> None:
    with RecordStore(tmp_path / "a.sqlite", domain="memtoy") as s:
        build(s, n=1, llm=FakeLLM(distil="garbage"))
        assert s.records[0].condition == INCL_COND  # the domain's rule-based distillation
    with RecordStore(tmp_path / "b.sqlite", domain="memtoy") as s:
        build(s, n=1, llm=FakeLLM(distil="bad_condition"))
        r = s.records[0]
        assert r.situation == "a boundary slip" and r.condition == ""  # unparseable → none


def test_reflexion_agent_and_bad_inputs(store: RecordStore, tmp_path: Path) -> None:
    summary = build_memory(
        ToyDomain(), make_tasks(3), store, FakeLLM(), ToyEvaluator(), agent_kind="reflexion"
    )
    assert summary.tasks == 3 and summary.admitted == 1
    from dataclasses import replace

    alien = [replace(t, domain="sql") for t in make_tasks(1)]
    with pytest.raises(ValueError, match="domain"):
        build_memory(ToyDomain(), alien, store, FakeLLM(), ToyEvaluator())
    snap = store.freeze(tmp_path / "snap.sqlite")
    with pytest.raises(ValueError, match="writable"):
        build_memory(ToyDomain(), make_tasks(1), snap, FakeLLM(), ToyEvaluator())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ConstructionConfig(retention="lru")


def test_alternatives_go_to_check_many_when_the_evaluator_offers_it(tmp_path: Path) -> None:
    """Independent checks of one failed decision's alternatives are one `check_many` call (an
    evaluator may run them in parallel); records and counters are those of a one-by-one build."""
    from memfakes import ToyEvaluator as Base

    class Batching(Base):
        def __init__(self) -> None:
            super().__init__()
            self.batches: list[int] = []

        def check_many(self, state, actions):  # type: ignore[no-untyped-def]
            self.batches.append(len(actions))
            return [self.check(state, a) for a in actions]

    results = []
    for name, evaluator in (("serial", Base()), ("batched", Batching())):
        with RecordStore(tmp_path / f"{name}.sqlite", domain=ToyDomain.name) as store:
            summary = build_memory(
                ToyDomain(), make_tasks(8), store, FakeLLM(), evaluator, ConstructionConfig()
            )
            results.append(
                ([r.contrast_key for r in store.records], summary.alternatives_checked, evaluator.calls)
            )
    assert results[0] == results[1]
    assert evaluator.batches and sum(evaluator.batches) == results[1][1]  # type: ignore[attr-defined]


def test_a_condition_false_on_its_own_source_task_is_refused(store: RecordStore) -> None:
    summary, _, _ = build(store, n=6, llm=FakeLLM(distil="wrong_condition"))
    assert len(store) == 0 and summary.rejected["condition_false_on_source"] >= 1
    kept, _, _ = build(
        RecordStore(store.path.with_name("kept.sqlite"), domain="memtoy"),
        n=6,
        llm=FakeLLM(distil="wrong_condition"),
        refuse_false_on_source=False,
    )
    assert kept.admitted >= 1


def test_a_condition_true_on_every_build_task_is_refused(store: RecordStore) -> None:
    """On an all-inclusive T_build the 'at least' condition can never be false: refused; on a
    mixed T_build (strict tasks too) the same condition discriminates and is admitted."""
    domain, evaluator = ToyDomain(), ToyEvaluator()
    inclusive = make_tasks(24, kinds=("inclusive",))
    summary = build_memory(domain, inclusive, store, FakeLLM(), evaluator, ConstructionConfig())
    assert len(store) == 0 and summary.rejected["condition_vacuous"] >= 1
    mixed = RecordStore(store.path.with_name("mixed.sqlite"), domain="memtoy")
    summary = build_memory(domain, make_tasks(24), mixed, FakeLLM(), evaluator, ConstructionConfig())
    assert summary.admitted >= 1 and "condition_vacuous" not in summary.rejected


def test_reuse_that_breaks_a_right_draft_is_harmful_and_u_goes_negative(store: RecordStore) -> None:
    """Without the condition filter the boundary fix reaches strict tasks, whose drafts are right:
    against the memory-free draft (checked on a fork) that use is harmful; the paper's rule,
    against a previous failed attempt, cannot see it."""
    summary, _, _ = build(store, n=12, use_conditions=False)
    assert summary.reuse_labels["harmful"] > 0 and min(r.u for r in store.records) < 0
    paper = RecordStore(store.path.with_name("paper.sqlite"), domain="memtoy")
    summary, _, _ = build(paper, n=12, use_conditions=False, reuse_label_rule="paper")
    assert summary.reuse_labels["harmful"] == 0 and min(r.u for r in paper.records) >= 0


class _InstanceEvaluator(ToyEvaluator):
    """A toy world model that can check a contrast on other instances (as SQL's with variants)."""

    def __init__(self, confirmed: bool) -> None:
        super().__init__()
        self.confirmed, self.asked = confirmed, []

    def confirm_contrast(self, state, a_minus, a_plus):  # noqa: ANN001, ANN201
        self.asked.append((state.task.task_id, a_minus, a_plus))
        return {"confirmed": self.confirmed}


@pytest.mark.parametrize("confirmed", [True, False])
def test_admission_on_several_instances_refuses_what_the_world_model_refutes(
    store: RecordStore, confirmed: bool
) -> None:
    evaluator = _InstanceEvaluator(confirmed)
    summary = build_memory(ToyDomain(), make_tasks(1), store, FakeLLM(), evaluator, ConstructionConfig())  # type: ignore[arg-type]
    assert evaluator.asked and all(a_plus.endswith("age >= 10") for _, _, a_plus in evaluator.asked)
    assert len(store) == (1 if confirmed else 0)
    assert summary.rejected.get("refused_on_instances", 0) == (0 if confirmed else len(evaluator.asked))
