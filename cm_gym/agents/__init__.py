"""Selectors for the memory-selection env: masked DQN on stable-baselines3 and baseline policies.

Imports only Gymnasium, stable-baselines3, torch, numpy and `cm_gym.envs.features` (ARCHITECTURE.md).
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
from cm_gym.agents.masked_dqn import TABLE3, TABLE3_POLICY_KWARGS, MaskedDQN, random_valid_actions
from cm_gym.agents.policies import MaskedDQNPolicy, MaskedQNetwork, masked_argmax, masked_max

__all__ = [
    "BASELINES",
    "PAIR_BASELINES",
    "TABLE3",
    "TABLE3_POLICY_KWARGS",
    "AlwaysSkip",
    "BaselinePolicy",
    "MaskedDQN",
    "MaskedDQNPolicy",
    "MaskedQNetwork",
    "Oracle",
    "RandomValid",
    "TopOne",
    "TopTwo",
    "masked_argmax",
    "masked_max",
    "random_valid_actions",
]
