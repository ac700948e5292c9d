"""Your own policy in the results table: a hand-written rule next to the built-in baselines.

Run: python examples/compare_policy.py  (see docs/tutorials/your-policy.md)
"""

from __future__ import annotations

from typing import Any

import numpy as np

import cm_gym
from cm_gym.envs.features import SLOT_DIM, SLOT_FEATURES, SLOTS
from cm_gym.protocol.report import results_table

RELEVANCE = SLOT_FEATURES.index("relevance")  # per slot: relevance, admission, Δ, u, ..., validity


class MostRelevant:
    """Use the most relevant retrieved record when its relevance reaches `threshold`, else skip.

    Anything with SB3's ``predict`` can be evaluated; a ``predict`` that takes ``action_masks``
    gets the env's mask (0 = skip is always valid, j = use slot j)."""

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def predict(
        self, obs: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:  # fmt: skip
        relevance = np.asarray(obs)[SLOTS][RELEVANCE::SLOT_DIM]  # one value per slot
        valid = np.asarray(action_masks, dtype=bool)[1:] if action_masks is not None else relevance > 0
        scores = np.where(valid, relevance, -np.inf)
        best = int(np.argmax(scores))
        action = best + 1 if scores[best] >= self.threshold else 0
        return np.array(action), state


def make_policy(env: Any = None, seed: int = 0) -> MostRelevant:
    """A factory, as ``cm-gym evaluate --policy NAME=compare_policy:make_policy`` accepts."""
    return MostRelevant(threshold=0.5)


if __name__ == "__main__":
    results = cm_gym.evaluate_policies(
        {"most relevant ≥ 0.5": MostRelevant(0.5), "most relevant ≥ 0.8": MostRelevant(0.8)},
        benchmark="SQL",  # store=None: the benchmark's default frozen store
        baselines=("none", "top1", "random", "oracle"),
        seeds=(0, 1, 2),
    )
    print(results_table(results))
