"""Wrappers for the memory-selection env: SPEC §8 episode metrics, selector-side ablations and
mask bridges for RLlib / TorchRL / Tianshou."""

from cm_gym.envs.wrappers.ablation import FEATURE_GROUPS, FeatureAblation, SlotLimit
from cm_gym.envs.wrappers.masking import ActionMaskObservation, make_masked_env
from cm_gym.envs.wrappers.metrics import EpisodeMetrics

__all__ = [
    "FEATURE_GROUPS",
    "ActionMaskObservation",
    "EpisodeMetrics",
    "FeatureAblation",
    "SlotLimit",
    "make_masked_env",
]
