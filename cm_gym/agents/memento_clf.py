"""Memento's case selector as released: a pairwise (task, record) relevance classifier trained
with cross-entropy on use outcomes (issue 34).

Source: Memento / AgentFly (Memento-Teams/Memento; H. Zhou et al., "Memento: Fine-tuning LLM
Agents without Fine-tuning LLMs", arXiv 2508.16153). The paper describes a soft-Q case-selection
policy; the released ``memory/train_memory_retriever.py`` — as issue 34 describes it; that file
was not in the reference index, so it was not read here — trains a classifier on (query, case)
pairs with cross-entropy and retrieves the cases it scores highest. This is that second, released
form, built from cm_gym's parts (no code of theirs):

- *Pair features* (38 dims): the query's projected embedding ``z_t[STATE]`` (P·E of the task
  prompt and state, 32 dims) times the record's ``P·E(situation)`` (from
  ``env.unwrapped.decision_context(vectors=True)``), element-wise — the interaction a bi-encoder's
  dot product sums — and the slot's six statistics (relevance, admission score, Δ, u, use
  frequency, helpful fraction). Memento fine-tunes a text encoder; a fixed hashing embedding and
  a linear classifier are the CPU-sized stand-in.
- *Labels* (use outcomes on the training stream): while training, the policy logs the decisions
  of a uniformly random valid action (skip included) — the pairs a record was actually shown for
  — with label 1 when that decision solved the task, else 0.
- *Classifier*: L2-regularised logistic regression (scikit-learn, ``C = 1.0``, lbfgs): the
  cross-entropy loss of a one-logit classifier; ``C = 1.0`` is scikit-learn's default, not a
  published value. Inputs are standardised on the training pairs.
- *Choice*: the retrieved record with the highest predicted probability. Memento always shows its
  top cases, so this policy never skips when a record is offered (``threshold=None``); a
  threshold makes it skip when no record's probability reaches it (not Memento's rule).

When the training stream gives no pair, or pairs of one label only, the classifier cannot be
fitted and the policy keeps the retrieval order (Top-1); ``training["fitted"]`` says which.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from cm_gym.agents.learned import LearnedSelector, slot_inputs
from cm_gym.envs.features import N_SLOTS, STATE, VALIDITY_INDICES

logger = logging.getLogger(__name__)

C = 1.0


def pair_features(obs: np.ndarray, j: int, record_vector: np.ndarray) -> np.ndarray:
    """The (task, record) features of slot `j` (38 dims, see the module doc)."""
    query = np.asarray(obs[STATE], dtype=np.float64)
    return np.concatenate([query * np.asarray(record_vector, dtype=np.float64), slot_inputs(obs, j)])


class MementoClassifier(LearnedSelector):
    """Pairwise relevance classifier over the retrieved records (see the module doc)."""

    name = "memento-clf"
    uses_context = True
    context_vectors = True

    def __init__(
        self,
        env: Any = None,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        *,
        c: float = C,
        threshold: float | None = None,
    ) -> None:
        super().__init__(env, seed, validity_indices)
        self.c, self.threshold = float(c), threshold
        self.x: list[np.ndarray] = []
        self.y: list[int] = []
        self.model: Any = None
        self.mean = np.zeros(0)
        self.scale = np.ones(0)

    def probabilities(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> np.ndarray:
        """P(use solves | task, record) per slot (NaN where masked); the retrieval order when the
        classifier is not fitted (1 for slot 1, then decreasing)."""
        out = np.full(1 + N_SLOTS, np.nan)
        valid = [j for j in range(1, N_SLOTS + 1) if j < len(mask) and mask[j]]
        if not valid:
            return out
        if self.model is None:
            for j in valid:
                out[j] = 1.0 - 0.1 * j
            return out
        assert context is not None
        x = np.stack([pair_features(obs, j, context["record_vectors"][j - 1]) for j in valid])
        p = self.model.predict_proba((x - self.mean) / self.scale)[:, 1]
        out[valid] = p
        return out

    def scores(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> np.ndarray:
        p = self.probabilities(obs, mask, context)
        out = np.full(1 + N_SLOTS, -np.inf)
        if np.all(np.isnan(p[1:])):
            out[0] = 0.0
            return out
        best = int(np.nanargmax(p[1:])) + 1
        use = self.threshold is None or p[best] >= self.threshold
        out[best if use else 0] = 0.0
        return out

    def explore(self, obs: np.ndarray, mask: np.ndarray, context: dict[str, Any] | None) -> int:
        return int(self.rng.choice(np.flatnonzero(mask)))

    def observe(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        info: dict[str, Any],
        context: dict[str, Any] | None,
    ) -> None:
        if action > 0 and context is not None and not info.get("invalid_action"):
            self.x.append(pair_features(obs, action, context["record_vectors"][action - 1]))
            self.y.append(int(bool(info.get("solved"))))

    def finish_training(self) -> None:
        if not self.y or len(set(self.y)) < 2:
            logger.warning(
                "memento-clf: %d training pairs with labels %s: not fitted, keeps the retrieval order",
                len(self.y),
                sorted(set(self.y)),
            )
            return
        from sklearn.linear_model import LogisticRegression

        x = np.stack(self.x)
        self.mean, self.scale = x.mean(axis=0), x.std(axis=0) + 1e-8
        self.model = LogisticRegression(C=self.c, max_iter=1000)
        self.model.fit((x - self.mean) / self.scale, np.array(self.y))

    def stats(self) -> dict[str, Any]:
        y = np.array(self.y)
        out: dict[str, Any] = {
            "pairs": len(y),
            "positive_rate": float(y.mean()) if len(y) else None,
            "fitted": self.model is not None,
        }
        if self.model is not None:
            x = (np.stack(self.x) - self.mean) / self.scale
            out["train_accuracy"] = float(self.model.score(x, y))
        return out
