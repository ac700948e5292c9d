"""The learned selectors the field has proposed, by name (issue 34), next to the baselines.

``LEARNED[name]`` is a `LearnedSelector` subclass: ``make_learned(name, env=..., seed=...)``
builds one, ``policy.fit(train_env, task_ids, total_decisions=N)`` trains it on the training
stream with the store frozen, and ``predict`` acts greedily. The protocol
(`cm_gym.protocol.zoo`) does both for ``cm-gym evaluate --policies memrl ...`` and
``cm-gym compare``.

| name          | module                          | source                                   |
|---------------|---------------------------------|------------------------------------------|
| `memrl`       | `cm_gym.agents.memrl`           | MemRL, arXiv 2601.03192                  |
| `memq`        | `cm_gym.agents.memq`            | MemQ, arXiv 2605.08374                   |
| `linucb`      | `cm_gym.agents.linucb`          | Li et al., WWW 2010                      |
| `thompson`    | `cm_gym.agents.thompson`        | Agrawal & Goyal, ICML 2013               |
| `memento-clf` | `cm_gym.agents.memento_clf`     | Memento, arXiv 2508.16153 (released clf) |
"""

from __future__ import annotations

from typing import Any

from cm_gym.agents.learned import LearnedSelector
from cm_gym.agents.linucb import LinUCB
from cm_gym.agents.memento_clf import MementoClassifier
from cm_gym.agents.memq import MemQ
from cm_gym.agents.memrl import MemRL
from cm_gym.agents.thompson import ThompsonSampling

LEARNED: dict[str, type[LearnedSelector]] = {
    "memrl": MemRL,
    "memq": MemQ,
    "linucb": LinUCB,
    "thompson": ThompsonSampling,
    "memento-clf": MementoClassifier,
}
LABELS: dict[str, str] = {
    "memrl": "MemRL (per-record Q)",
    "memq": "MemQ (Q + provenance credit)",
    "linucb": "LinUCB (z_t per slot)",
    "thompson": "Thompson sampling (z_t per slot)",
    "memento-clf": "Memento classifier (pairwise CE)",
}


def make_learned(name: str, env: Any = None, seed: int = 0, **kwargs: Any) -> LearnedSelector:
    """An untrained selector by name; `kwargs` override its published constants."""
    if name not in LEARNED:
        raise KeyError(f"unknown learned selector {name!r}; known: {', '.join(LEARNED)}")
    return LEARNED[name](env=env, seed=seed, **kwargs)
