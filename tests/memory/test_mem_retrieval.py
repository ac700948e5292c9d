"""Retrieval: eligibility before ranking, cos + λu, deterministic ties, ablation switch and modes."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from memfakes import ToyDomain, make_task

from cm_gym.core.types import AgentState
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.record import Record
from cm_gym.memory.retrieval import Retriever, query_text, record_view
from cm_gym.memory.store import RecordStore

INCL = 'mentions_any("at least") AND memtoy_has_number()'


@pytest.fixture
def domain() -> ToyDomain:
    d = ToyDomain()
    # the toy domain's predicate kinds carry a "toy_" prefix; alias one for readability here
    preds = dict(d.condition_predicates())
    preds["memtoy_has_number"] = preds["toy_has_number"]
    d.condition_predicates = lambda: preds  # type: ignore[method-assign]
    return d


def test_own_task_records_are_never_retrieved(store: RecordStore, domain: ToyDomain, make_record) -> None:
    t = make_task(0, "inclusive")
    own = store.add(make_record(source_task_id=t.task_id, situation=t.prompt))
    other = store.add(make_record(source_task_id="mt-9999", situation="unrelated words entirely"))
    got = Retriever(store, domain).retrieve(t, t.prompt)
    assert [g.record.record_id for g in got] == [other.record_id]
    assert own.record_id not in {
        g.record.record_id for g in Retriever(store, domain, mode="random").retrieve(t)
    }


def test_condition_is_enforced_and_the_ablation_switch_removes_it(
    store: RecordStore, domain: ToyDomain, make_record
) -> None:
    r = store.add(make_record(condition=INCL))
    inclusive, strict = make_task(1, "inclusive"), make_task(2, "strict")
    assert [g.record for g in Retriever(store, domain).retrieve(inclusive)] == [r]
    assert Retriever(store, domain).retrieve(strict) == []
    assert [g.record for g in Retriever(store, domain, use_conditions=False).retrieve(strict)] == [r]


def test_rank_is_cos_plus_lambda_u(store: RecordStore, domain: ToyDomain, make_record) -> None:
    t = make_task(3, "inclusive")
    close = store.add(make_record(situation=t.prompt))
    far = store.add(make_record(situation="List people whose height is at least 99 metres tall"))
    base = Retriever(store, domain, lambda_reuse=0.2).retrieve(t, t.prompt)
    assert [g.record.record_id for g in base] == [close.record_id, far.record_id]
    gap = base[0].relevance - base[1].relevance
    assert base[0].relevance == pytest.approx(1.0, abs=1e-5)
    for _ in range(12):  # drive u(far) to ~+1 and u(close) to ~-1
        store.update_reuse(far.record_id, 1, 0.3)
        store.update_reuse(close.record_id, -1, 0.3)
    u_far, u_close = store.get(far.record_id).u, store.get(close.record_id).u
    lam = (gap + 0.05) / (u_far - u_close)  # just enough reuse weight to flip the order
    got = Retriever(store, domain, lambda_reuse=lam).retrieve(t, t.prompt)
    assert [g.record.record_id for g in got] == [far.record_id, close.record_id]
    for g in got:
        assert g.rank_score == pytest.approx(g.relevance + lam * g.record.u, abs=1e-5)


def test_top_k_and_deterministic_ties(store: RecordStore, domain: ToyDomain, make_record) -> None:
    same = "A numeric threshold comparison may omit its boundary value."
    recs = [store.add(make_record(situation=same)) for _ in range(7)]
    t = make_task(4, "inclusive")
    got = Retriever(store, domain, k=3).retrieve(t, same)
    expected = sorted(r.record_id for r in recs)[:3]
    assert [g.record.record_id for g in got] == expected
    assert len({g.rank_score for g in got}) == 1
    assert Retriever(store, domain, k=0).retrieve(t, same) == []


def test_modes(store: RecordStore, domain: ToyDomain, make_record) -> None:
    t = make_task(5, "strict")
    recs = [
        store.add(make_record(condition=INCL, situation=f"situation number {i} about joins"))
        for i in range(8)
    ]
    recs.append(store.add(make_record(source_task_id=t.task_id)))  # own task: never returned
    assert Retriever(store, domain, mode="none").retrieve(t, "x") == []
    assert Retriever(store, domain).retrieve(t, "x") == []  # conditions fail for a strict task
    rnd = Retriever(store, domain, mode="random", seed=1).retrieve(t, "x")
    assert len(rnd) == 3 and len({g.record.record_id for g in rnd}) == 3
    assert all(g.record.source_task_id != t.task_id for g in rnd)
    again = Retriever(store, domain, mode="random", seed=1).retrieve(t, "x")
    assert [g.record.record_id for g in again] == [g.record.record_id for g in rnd]
    seeds = {
        tuple(g.record.record_id for g in Retriever(store, domain, mode="random", seed=s).retrieve(t, "x"))
        for s in range(6)
    }
    assert len(seeds) > 1
    q = Embedder().embed_one(query_text(t, "x"))
    shuf = Retriever(store, domain, mode="shuffled", seed=3).retrieve(t, "x")
    assert 1 <= len(shuf) <= 3 and all(g.record.source_task_id != t.task_id for g in shuf)
    emb = {r.record_id: store.embedding_of(r.record_id) for r in store.records}
    for g in shuf:  # relevance is the true similarity to this state
        assert g.relevance == pytest.approx(float(emb[g.record.record_id] @ q), abs=1e-5)
    with pytest.raises(ValueError):
        Retriever(store, domain, mode="oracle")


def test_index_follows_store_changes(store: RecordStore, domain: ToyDomain, make_record) -> None:
    t = make_task(6, "inclusive")
    ret = Retriever(store, domain)
    assert ret.retrieve(t) == []
    r = store.add(make_record(condition=INCL))
    assert [g.record for g in ret.retrieve(t)] == [r]
    store.update_reuse(r.record_id, 1, 0.3)
    got = ret.retrieve(t)
    assert got[0].record.u == pytest.approx(0.3)
    assert got[0].rank_score == pytest.approx(got[0].relevance + 0.2 * 0.3, abs=1e-6)
    store.remove([r.record_id])
    assert ret.retrieve(t) == []


def test_unparseable_stored_condition_counts_as_none(
    store: RecordStore, domain: ToyDomain, make_record, caplog: pytest.LogCaptureFixture
) -> None:
    r = store.add(make_record(condition="only if it feels inclusive"))
    with caplog.at_level(logging.WARNING):
        got = Retriever(store, domain).retrieve(make_task(7, "strict"))
    assert [g.record for g in got] == [r]
    assert "unparseable condition" in caplog.text


def test_other_domain_task_gets_nothing(store: RecordStore, domain: ToyDomain, make_record) -> None:
    from dataclasses import replace

    store.add(make_record())
    assert Retriever(store, domain).retrieve(replace(make_task(8, "inclusive"), domain="sql")) == []


def test_record_view_with_and_without_condition(make_record) -> None:
    r = make_record(condition=INCL)
    with_c, without = record_view(r), record_view(r, show_condition=False)
    assert with_c.record_id == r.record_id and with_c.a_minus == r.a_minus and with_c.a_plus == r.a_plus
    assert "at least" in with_c.rendered and "at least" not in without.rendered
    assert r.a_plus in without.rendered and r.situation in without.rendered
    # the two renderings differ only by the condition clause
    extra = [line for line in with_c.rendered.splitlines() if line not in without.rendered.splitlines()]
    assert len(extra) == 1 and "at least" in extra[0]


@dataclass
class ArraySource:
    """A minimal RecordSource over given records and an embedding matrix (any dtype)."""

    records: list[Record]
    embeddings: np.ndarray
    domain: str = "memtoy"
    embedder_id: str = field(default_factory=lambda: Embedder().embedder_id)
    revision: int = 0
    layout_revision: int = 0


def test_gather_and_slice_paths_and_float16_agree(domain: ToyDomain, make_record) -> None:
    rng = np.random.default_rng(0)
    n = 400
    conds = [INCL if i % 10 == 0 else 'mentions_any("strictly")' for i in range(n)]  # ~10% eligible
    srcs = ["mt-0009" if i % 7 == 0 else f"src-{i}" for i in range(n)]
    recs = [make_record(condition=conds[i], source_task_id=srcs[i]) for i in range(n)]
    emb = rng.random((n, 512)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    t = make_task(9, "inclusive")
    q = emb[11].copy()

    def expected(ok: list[int]) -> list[str]:
        return [
            recs[i].record_id for i in sorted(ok, key=lambda i: (-float(emb[i] @ q), recs[i].record_id))[:3]
        ]

    sparse = expected([i for i in range(n) if i % 10 == 0 and i % 7])  # gathered rows
    dense = expected([i for i in range(n) if i % 7])  # whole-slice scoring
    for matrix in (emb, emb.astype(np.float16)):
        got = Retriever(ArraySource(recs, matrix), domain).retrieve(t, query=q)
        assert [g.record.record_id for g in got] == sparse
        got = Retriever(ArraySource(recs, matrix), domain, use_conditions=False).retrieve(t, query=q)
        assert [g.record.record_id for g in got] == dense


def test_large_store_scores_only_the_runs_whose_condition_holds(domain: ToyDomain, make_record) -> None:
    rng = np.random.default_rng(1)
    n = 5000  # above the span threshold
    pool = [INCL, 'mentions_any("strictly")', "", 'family_is("inclusive")', 'family_is("strict")']
    conds = [pool[int(c)] for c in rng.integers(0, len(pool), n)]
    srcs = ["mt-0009" if i % 11 == 0 else f"src-{i}" for i in range(n)]
    recs = [make_record(condition=conds[i], source_task_id=srcs[i]) for i in range(n)]
    emb = rng.random((n, 512)).astype(np.float32) ** 4
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    t = make_task(9, "inclusive")
    q = emb[123].copy()
    holds = {INCL: True, 'mentions_any("strictly")': False, "": True, 'family_is("inclusive")': True}
    ok = [i for i in range(n) if holds.get(conds[i], False) and i % 11]
    u = rng.uniform(-1, 1, n)
    recs = [replace(r, u=float(u[i])) for i, r in enumerate(recs)]
    want = sorted(ok, key=lambda i: (-(float(emb[i] @ q) + 0.2 * u[i]), recs[i].record_id))[:3]
    got = Retriever(ArraySource(recs, emb), domain).retrieve(t, query=q)
    assert [g.record.record_id for g in got] == [recs[i].record_id for i in want]
    for g in got:
        i = recs.index(g.record)
        assert g.relevance == pytest.approx(float(emb[i] @ q), abs=1e-5)


def test_decision_query_is_the_question_and_draft_not_the_state(
    store: RecordStore, domain: ToyDomain
) -> None:
    """φ(s) is `Domain.retrieval_text` (question + draft) when the draft is given: a long
    environment context in the state text does not move the ranking."""
    t = make_task(3, "inclusive")
    assert domain.retrieval_text(t, "SELECT 1") == f"{t.prompt}\nSELECT 1"
    retriever = Retriever(store, domain)
    noisy = AgentState(replace(t, context="CREATE TABLE " + "x " * 400)).render()
    q_draft = retriever.query_embedding(t, noisy, draft="SELECT name FROM people WHERE age > 13")
    q_clean = retriever.query_embedding(t, "", draft="SELECT name FROM people WHERE age > 13")
    assert np.allclose(q_draft, q_clean)
    assert not np.allclose(retriever.query_embedding(t, noisy), q_clean)
