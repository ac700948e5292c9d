"""Admission (ε_adm, Eq. 4 with redundancy and conflict), retention policies (Eq. 5) and Eq. 6."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cm_gym.memory.admission import AdmissionWeights, decide_admission, redundancy
from cm_gym.memory.record import Record
from cm_gym.memory.retention import RetentionWeights, choose_evictions, keep_scores
from cm_gym.memory.store import RecordStore

INCL = 'mentions_any("at least")'
STRICT = 'mentions_any("strictly")'


def admit(store: RecordStore, record: Record, inverse: str = "cmp:GTE->GT", **kw: object):
    emb = store.embedder.embed_one(record.situation)
    result = decide_admission(record, emb, store, inverse_key=inverse, **kw)  # type: ignore[arg-type]
    if result.admitted:
        store.add(record, emb)
    return result


def test_epsilon_applies_to_raw_delta_and_incomplete_checks(store: RecordStore, make_record) -> None:
    assert admit(store, make_record(delta=0.05)).reason == "not_improved"  # Δ must exceed ε
    assert admit(store, make_record(delta=-0.5)).reason == "not_improved"
    assert admit(store, make_record(delta=1.0), completed=False).reason == "not_improved"
    res = admit(store, make_record(delta=0.06))  # passes ε, but S_adm = Δ̃ = 0.06 ≤ τ
    assert res.reason == "below_tau" and res.score == pytest.approx(0.06)
    res = admit(store, make_record(delta=0.2))
    assert res.admitted and res.score == pytest.approx(0.2)
    assert admit(store, make_record(delta=0.2), epsilon=0.3).reason == "not_improved"


def test_tau_is_configurable(store: RecordStore, make_record) -> None:
    assert admit(store, make_record(delta=0.08), tau=0.05).admitted
    assert admit(store, make_record(delta=0.9), tau=0.95).reason == "below_tau"


def test_duplicates_are_rejected(store: RecordStore, make_record) -> None:
    r = make_record()
    assert admit(store, r).admitted
    assert admit(store, r).reason == "duplicate"


def test_redundancy_counts_equivalent_copies(store: RecordStore, make_record) -> None:
    situation = "A numeric threshold comparison may omit its boundary value."
    first = admit(store, make_record(condition=INCL, situation=situation))
    assert first.admitted and first.redundancy == 0.0 and first.score == pytest.approx(1.0)
    second = admit(store, make_record(condition=INCL, situation=situation))
    assert second.admitted and second.redundancy == pytest.approx(1.0) and second.score == pytest.approx(0.3)
    third = admit(store, make_record(condition=INCL, situation=situation))
    assert third.reason == "below_tau" and third.redundancy == pytest.approx(2.0)
    # same key under a partly overlapping condition: overlap x situation similarity
    other = make_record(
        condition=INCL + ' AND mentions_none("strictly")', situation="Ages of N or older include N."
    )
    emb = store.embedder.embed_one(other.situation)
    cos = float(emb @ store.embedder.embed_one(situation))
    assert 0 < cos < 1
    assert redundancy(other, emb, store) == pytest.approx(2 * 0.5 * cos, abs=1e-5)
    # ... an unconditional one overlaps fully; a disjoint condition is not redundant at all
    assert redundancy(replace(other, condition=""), emb, store) == pytest.approx(2 * cos, abs=1e-5)
    assert redundancy(replace(other, condition=STRICT), emb, store) == 0.0
    # a different contrast key is not redundant at all
    unrelated = make_record(contrast_key="cmp:LT->LTE", condition=INCL, situation=situation)
    assert redundancy(unrelated, store.embedder.embed_one(situation), store) == 0.0


def test_conflicting_advice_is_rejected_only_under_overlapping_conditions(
    store: RecordStore, make_record
) -> None:
    # stored: "use > (not >=)" unconditionally
    opposite = make_record(contrast_key="cmp:GTE->GT", condition="", a_minus="x >= 1", a_plus="x > 1")
    assert admit(store, opposite, inverse="cmp:GT->GTE").admitted
    res = admit(store, make_record(condition=INCL))
    assert res.reason == "conflict" and res.conflict == 1.0
    # opposite advice under a disjoint condition does not conflict
    store.remove([opposite.record_id])
    assert admit(
        store, make_record(contrast_key="cmp:GTE->GT", condition=STRICT), inverse="cmp:GT->GTE"
    ).admitted
    res = admit(store, make_record(condition=INCL))
    assert res.admitted and res.conflict == 0.0


def test_reuse_prior_of_the_same_advice(store: RecordStore, make_record) -> None:
    bad = store.add(make_record(condition=INCL, situation="totally different text one"))
    for _ in range(10):
        store.update_reuse(bad.record_id, -1, 0.3)
    u = store.get(bad.record_id).u
    cand = make_record(condition=STRICT, situation="zzz qqq")
    res = admit(store, cand)
    assert res.u_prior == pytest.approx(u)
    w = AdmissionWeights()
    assert res.score == pytest.approx(w.delta * 1.0 + w.u * u - w.redundancy * res.redundancy)


def test_keep_scores_follow_eq5(make_record) -> None:
    a = make_record(delta=1.0, contrast_key="k1", u=0.5, uses=4, situation="alpha beta")
    b = make_record(delta=0.5, contrast_key="k2", u=-0.2, uses=2, situation="gamma delta")
    c = make_record(
        delta=1.0, contrast_key="k1", u=0.0, uses=0, situation="alpha beta"
    )  # same key + cond as a
    emb = np.stack([np.eye(512, dtype=np.float32)[i] for i in range(3)])
    s = keep_scores([a, b, c], emb, RetentionWeights())
    assert s[0] == pytest.approx(1.0 + 0.5 + 0.5 * 1.0 - 0.7 * 1.0)
    assert s[1] == pytest.approx(0.5 - 0.2 + 0.5 * 0.5)
    assert s[2] == pytest.approx(1.0 + 0.0 + 0.0 - 0.7 * 1.0)


def test_retention_policies(make_record) -> None:
    e = np.eye(512, dtype=np.float32)
    good = make_record(delta=1.0, u=0.6, uses=5, created_order=1, contrast_key="k1")
    harmful = make_record(delta=1.0, u=-0.8, uses=5, created_order=2, contrast_key="k2")
    twin1 = make_record(delta=1.0, created_order=3, contrast_key="k3")
    twin2 = make_record(delta=1.0, created_order=4, contrast_key="k4")
    pool = [good, harmful, twin1, twin2]
    emb = np.stack([e[0], e[1], e[2], (e[2] + 0.01 * e[3]) / np.linalg.norm(e[2] + 0.01 * e[3])])
    assert choose_evictions(pool, emb, 1, "utility") == [harmful.record_id]
    assert choose_evictions(pool, emb, 1, "recent") == [good.record_id]
    assert choose_evictions(pool, emb, 1, "similarity") == [twin1.record_id]  # older of the near-twins
    assert choose_evictions(pool, emb, 2, "recent") == [good.record_id, harmful.record_id]
    r1 = choose_evictions(pool, emb, 1, "random", rng=np.random.default_rng(5))
    r2 = choose_evictions(pool, emb, 1, "random", rng=np.random.default_rng(5))
    assert r1 == r2 and r1[0] in {r.record_id for r in pool}
    picks = {choose_evictions(pool, emb, 1, "random", rng=np.random.default_rng(s))[0] for s in range(20)}
    assert len(picks) > 1
    with pytest.raises(ValueError):
        choose_evictions(pool, emb, 1, "lru")


def test_reuse_update_eq6(make_record) -> None:
    r = make_record()
    seq = []
    for y in (1, 1, -1, 0):
        r = r.with_reuse(y, 0.3)
        seq.append(r.u)
    assert seq == pytest.approx([0.3, 0.51, 0.057, 0.0399])
    assert (r.uses, r.helpful, r.harmful, r.neutral) == (4, 2, 1, 1)
    assert make_record().helpful_fraction == 0.0
