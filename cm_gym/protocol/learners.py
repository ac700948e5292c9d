"""Selector learners other than the built-in masked DQN, as plugins of the ``cm_gym.learners``
entry-point group (`cm_gym.core.plugins`): a name (``--algo``) → ``"module:attr"`` of an object with
``train(cfg, snapshot, prepared, seed, llm, layout)`` (`train_selector`'s contract),
``load(checkpoint)`` (a policy with SB3's ``predict``) and ``owns(checkpoint)`` (a checkpoint it
wrote). The protocol never imports a learner's module: the RLlib learners register from the Ray
backend (pyproject.toml), and a third party adds one the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cm_gym.core.plugins import resolve, targets

GROUP = "cm_gym.learners"


def learner(algo: str) -> Any:
    """The learner plugin registered as `algo` (imported now)."""
    return resolve(GROUP, algo)


def load_plugin_checkpoint(checkpoint: str | Path) -> Any | None:
    """The policy of a checkpoint written by a learner plugin (a folder, for RLlib), None when no
    plugin owns it."""
    seen: set[int] = set()
    for name in targets(GROUP):
        plugin = learner(name)
        if id(plugin) in seen:
            continue
        seen.add(id(plugin))
        if plugin.owns(checkpoint):
            return plugin.load(checkpoint)
    return None
