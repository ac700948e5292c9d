"""The memory-selection environment (registered per benchmark as ``cm_gym/<Benchmark>-v0``)."""

from cm_gym.envs._loading import (
    DEFAULT_REWARD_WEIGHTS,
    RETRIEVAL_MODES,
    EnvConfigError,
    StoreMismatchError,
    StoreNotFrozenError,
)
from cm_gym.envs.selection import InvalidActionError, MemorySelectionEnv

__all__ = [
    "DEFAULT_REWARD_WEIGHTS",
    "RETRIEVAL_MODES",
    "EnvConfigError",
    "InvalidActionError",
    "MemorySelectionEnv",
    "StoreMismatchError",
    "StoreNotFrozenError",
]
