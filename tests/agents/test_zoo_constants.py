"""One test per published constant of the field's selectors (issue 34): each pins the value its
module docstring cites, so a change to a default is a visible, deliberate act."""

from __future__ import annotations

import math

import pytest

from cm_gym.agents import linear_bandit, linucb, memento_clf, memrl, thompson


def test_memrl_similarity_threshold_is_the_papers_delta() -> None:
    assert memrl.DELTA == 0.38  # arXiv 2601.03192 as issue 34 states it


def test_memrl_first_phase_keeps_k1_ten_candidates() -> None:
    assert memrl.K1 == 10


def test_memrl_mixes_q_and_similarity_half_and_half() -> None:
    assert memrl.LAMBDA == 0.5  # weight_q = weight_sim = 0.5 (configs/config.py)


def test_memrl_second_phase_keeps_k2_five() -> None:
    assert memrl.K2 == 5  # topk: int = 5


def test_memrl_step_size_alpha() -> None:
    assert memrl.ALPHA == 0.3  # alpha in config.py and every released config


def test_memrl_exploration_epsilon() -> None:
    assert memrl.EPSILON == 0.1  # epsilon in config.py


def test_memrl_initial_q() -> None:
    assert memrl.Q_INIT == 0.0  # q_init_pos


def test_memrl_q_floor_filter() -> None:
    assert memrl.Q_MIN == -0.8  # q_min_threshold


def test_memrl_rewards_success_and_failure() -> None:
    assert (memrl.SUCCESS_REWARD, memrl.FAILURE_REWARD) == (1.0, -1.0)


def test_memrl_is_one_step_monte_carlo() -> None:
    assert memrl.GAMMA == 0.0


def test_memrl_defaults_are_the_constants() -> None:
    policy = memrl.MemRL()
    assert (policy.delta, policy.k1, policy.lam, policy.k2) == (0.38, 10, 0.5, 5)
    assert (policy.alpha, policy.epsilon, policy.q_init, policy.q_min) == (0.3, 0.1, 0.0, -0.8)


def test_linucb_alpha_is_li_et_al_bound_at_delta_005() -> None:
    assert linucb.DELTA == 0.05
    assert pytest.approx(1 + math.sqrt(math.log(2 / 0.05) / 2)) == linucb.ALPHA
    assert pytest.approx(2.3581, abs=1e-4) == linucb.ALPHA
    assert linucb.LinUCB().alpha == linucb.ALPHA


def test_ridge_prior_is_the_identity() -> None:
    assert linear_bandit.RIDGE == 1.0  # A0 = I_d (Li et al. 2010, Alg. 1), B = I_d (Agrawal & Goyal)
    arm = linear_bandit.RidgeArm(3)
    assert (arm.a_inv == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]).all()


def test_thompson_posterior_scale() -> None:
    assert thompson.V == 0.25
    assert thompson.ThompsonSampling().v == 0.25


def test_memento_classifier_regularisation_is_sklearn_default() -> None:
    from sklearn.linear_model import LogisticRegression

    assert memento_clf.C == 1.0 == LogisticRegression().C
    assert memento_clf.MementoClassifier().threshold is None  # Memento always shows its top case
