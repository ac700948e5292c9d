"""The 98-dim observation layout, the fixed projection and the mask (numpy and torch, batched)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cm_gym.envs import features as F


def test_layout_slices_cover_98_dims_without_overlap() -> None:
    covered = np.zeros(F.OBS_DIM, dtype=int)
    for s in (F.STATE, F.DRAFT, F.SLOTS, F.BUDGET):
        covered[s] += 1
    assert F.OBS_DIM == 98 and (covered == 1).all()
    assert (slice(0, 32), slice(32, 64), slice(64, 92), slice(92, 98)) == (
        F.STATE,
        F.DRAFT,
        F.SLOTS,
        F.BUDGET,
    )
    assert F.VALIDITY_INDICES == (70, 77, 84, 91)
    assert [F.slot(j).start for j in range(1, 5)] == [64, 71, 78, 85]
    assert len(F.SLOT_FEATURES) == 7 and F.SLOT_FEATURES[-1] == "validity"
    with pytest.raises(ValueError):
        F.slot(0)


def test_projection_is_fixed_seeded_and_scaled() -> None:
    p = F.projection()
    expected = (np.random.default_rng(20260824).standard_normal((512, 32)) / np.sqrt(32)).astype(np.float32)
    np.testing.assert_array_equal(p, expected)
    assert not p.flags.writeable
    assert F.projection() is p  # computed once


def test_project_checks_dimension() -> None:
    with pytest.raises(F.ObservationLayoutError):
        F.project(np.ones(100))
    e = np.zeros(512, np.float32)
    e[3] = 1.0
    np.testing.assert_allclose(F.project(e), F.projection()[3])


def test_build_observation_fills_slots_and_budget() -> None:
    record = SimpleNamespace(admission_score=0.8, delta=1.0, u=-0.3, uses=10, helpful_fraction=0.4)
    s1 = F.SlotFeatures.from_record(record, relevance=0.9)
    s2 = F.SlotFeatures(0.5, 0.2, 0.1, 0.0, 0, 0.7)  # unused record: helpful fraction forced to 0
    budget = F.BudgetFeatures(
        decision=1,
        max_decisions=3,
        evaluator_calls=1,
        max_evaluator_calls=4,
        failures=1,
        tokens=30_000,
        token_budget=20_000,
        last_score=0.5,
    )
    state = np.zeros(512, np.float32)
    state[0] = 1.0
    obs = F.build_observation(state, None, [s1, s2], budget)
    assert obs.shape == (98,) and obs.dtype == np.float32
    np.testing.assert_allclose(obs[F.STATE], F.projection()[0])
    assert not obs[F.DRAFT].any()
    np.testing.assert_allclose(obs[F.slot(1)], [0.9, 0.8, 1.0, -0.3, 0.5, 0.4, 1.0], rtol=1e-6)
    np.testing.assert_allclose(obs[F.slot(2)], [0.5, 0.2, 0.1, 0.0, 0.0, 0.0, 1.0], rtol=1e-6)
    assert not obs[F.slot(3)].any() and not obs[F.slot(4)].any()
    np.testing.assert_allclose(obs[F.BUDGET], [2 / 3, 3 / 4, 1 / 3, 1.0, 0.5, 1 / 3], rtol=1e-6)
    with pytest.raises(F.ObservationLayoutError):
        F.build_observation(None, None, [s2] * 5, budget)


def test_mask_from_observation_numpy_and_torch_batches() -> None:
    budget = F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0)
    slots = [F.SlotFeatures(0.1, 0, 0, 0, 0, 0)]
    batch = np.stack([F.build_observation(None, None, slots * n, budget) for n in range(5)])
    expected = np.array([[True] + [j < n for j in range(4)] for n in range(5)])
    np.testing.assert_array_equal(F.mask_from_observation(batch), expected)
    np.testing.assert_array_equal(F.mask_from_observation(batch[2]), expected[2])
    t = F.mask_from_observation(torch.as_tensor(batch))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.bool
    np.testing.assert_array_equal(t.numpy(), expected)
    stacked = F.mask_from_observation(batch.reshape(5, 1, 98))  # extra leading dims
    assert stacked.shape == (5, 1, 5)
    with pytest.raises(F.ObservationLayoutError):
        F.mask_from_observation(np.zeros((2, 50)))


def test_describe_names_every_feature() -> None:
    obs = F.build_observation(
        None, None, [F.SlotFeatures(0.3, 0, 0, 0, 1, 1.0)], F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0)
    )
    d = F.describe(obs)
    assert d["slots"][0]["validity"] == 1.0 and d["slots"][1]["validity"] == 0.0
    assert d["budget"]["remaining_decisions"] == 1.0
    assert d["mask"] == [True, True, False, False, False]


def test_mask_for_matches_mask_from_observation() -> None:
    budget = F.BudgetFeatures(0, 3, 0, 3, 0, 0, 1, 0.0)
    for n in range(5):
        obs = F.build_observation(None, None, [F.SlotFeatures(0.2, 0, 0, 0, 0, 0)] * n, budget)
        np.testing.assert_array_equal(F.mask_for(n), F.mask_from_observation(obs))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # (1e300 as float32)
def test_build_observation_writes_each_part_as_its_vector() -> None:
    """The slots, budget and extras written as value lists hold exactly their `vector()`s (the
    same float32 rounding) at `slot(j)`, `BUDGET` and `extra_slot(j)`, zeros elsewhere, for any
    number of slots, either layout, and values float32 cannot hold (huge, tiny, NaN, negative)."""
    rng = np.random.default_rng(48)
    odd = [1e300, -1e-300, float("nan"), -0.0, 1 / 3, 7.0]
    for trial in range(300):
        layout = ("paper", "extended")[trial % 2]
        k = int(rng.integers(0, F.N_SLOTS + 1))

        def value() -> float:
            return float(rng.choice(odd)) if rng.random() < 0.3 else float(rng.normal())

        slots = [
            F.SlotFeatures(value(), value(), value(), value(), int(rng.integers(-3, 50)), value())
            for _ in range(k)
        ]
        budget = F.BudgetFeatures(*(int(x) for x in rng.integers(0, 40, 7)), value())
        extras = [F.SlotExtras(bool(rng.random() < 0.5), bool(rng.random() < 0.5)) for _ in range(k)]
        state = rng.random(F.EMBED_DIM).astype(np.float32) if trial % 3 else None
        obs = F.build_observation(
            state, None, slots, budget, extras if layout == "extended" else None, layout
        )
        expected = np.zeros(F.obs_dim(layout), dtype=np.float32)
        if state is not None:
            expected[F.STATE] = F.project(state)
        for j, (features, extra) in enumerate(zip(slots, extras, strict=True), start=1):
            expected[F.slot(j)] = features.vector()
            if layout == "extended":
                expected[F.extra_slot(j)] = extra.vector()
        expected[F.BUDGET] = budget.vector()
        assert obs.dtype == np.float32 and obs.tobytes() == expected.tobytes()
