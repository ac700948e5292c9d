"""Selectors for the memory-selection env: masked DQN on stable-baselines3, baseline policies and
the field's learned selectors (`cm_gym.agents.zoo`: MemRL, MemQ, LinUCB, Thompson sampling,
Memento's classifier).

Imports only Gymnasium, stable-baselines3, torch, numpy and `cm_gym.envs.features` (ARCHITECTURE.md);
scikit-learn too, when the Memento classifier fits.
"""

from cm_gym.agents.baselines import (
    BASELINES,
    PAIR_BASELINES,
    AlwaysSkip,
    BaselinePolicy,
    Oracle,
    RandomValid,
    TopOne,
    TopTwo,
)
from cm_gym.agents.learned import LearnedSelector
from cm_gym.agents.linucb import LinUCB
from cm_gym.agents.masked_dqn import TABLE3, TABLE3_POLICY_KWARGS, MaskedDQN, random_valid_actions
from cm_gym.agents.memento_clf import MementoClassifier
from cm_gym.agents.memq import MemQ
from cm_gym.agents.memrl import MemRL
from cm_gym.agents.policies import MaskedDQNPolicy, MaskedQNetwork, masked_argmax, masked_max
from cm_gym.agents.thompson import ThompsonSampling
from cm_gym.agents.zoo import LEARNED, make_learned

__all__ = [
    "BASELINES",
    "LEARNED",
    "PAIR_BASELINES",
    "TABLE3",
    "TABLE3_POLICY_KWARGS",
    "AlwaysSkip",
    "BaselinePolicy",
    "LearnedSelector",
    "LinUCB",
    "MaskedDQN",
    "MaskedDQNPolicy",
    "MaskedQNetwork",
    "MemQ",
    "MemRL",
    "MementoClassifier",
    "Oracle",
    "RandomValid",
    "ThompsonSampling",
    "TopOne",
    "TopTwo",
    "masked_argmax",
    "make_learned",
    "masked_max",
    "random_valid_actions",
]
