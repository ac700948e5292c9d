"""Wrappers for the memory-selection env: SPEC §8 episode metrics and selector-side ablations."""

from cm_gym.wrappers.ablation import FEATURE_GROUPS, FeatureAblation, SlotLimit
from cm_gym.wrappers.metrics import EpisodeMetrics

__all__ = ["FEATURE_GROUPS", "EpisodeMetrics", "FeatureAblation", "SlotLimit"]
