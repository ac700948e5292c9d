"""Issue 33, item 3: every wrapper validates an action as the env it wraps does (one shared path,
`cm_gym.envs._actions.checked_action`). The probes: ``step(1.9)`` and ``step("1")`` used to run
slot 1 under `SlotLimit`, ``step(-1)`` was judged by the last mask entry, ``step(17)`` was a raw
IndexError and ``step(nan)`` a raw ValueError; the unwrapped pair env refuses all five."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cm_gym.envs._actions import InvalidActionError
from cm_gym.envs.wrappers import ActionMaskObservation, EpisodeMetrics, FeatureAblation, SlotLimit
from tests.envs.toy_env import build_toy_store, make_toy

HOSTILE: list[Any] = [1.9, "1", -1, 17, float("nan"), 1.0, True, None, [1], np.array([1, 2]), np.float32(1)]

WRAPPERS: dict[str, Callable[[gym.Env], gym.Env]] = {
    "none": lambda env: env,
    "slot_limit": lambda env: SlotLimit(env, n_slots=2),
    "slot_limit_0": lambda env: SlotLimit(env, n_slots=0),
    "feature_ablation": lambda env: FeatureAblation(env, drop=("draft",)),
    "episode_metrics": lambda env: EpisodeMetrics(env),
    "mask_observation": lambda env: ActionMaskObservation(env),
    "stacked": lambda env: EpisodeMetrics(SlotLimit(FeatureAblation(env, drop=("budget",)), n_slots=1)),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_toy_store(tmp_path_factory.mktemp("wrapper-actions") / "toy.sqlite"))


def _counted(env: gym.Env) -> list[Any]:
    """Record every action that reaches the base env's step (none may, for a refused one)."""
    base = env.unwrapped
    seen: list[Any] = []
    original = base.step

    def step(action: Any) -> Any:
        seen.append(action)
        return original(action)

    base.step = step  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("space", ["pairs", "single"])
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_every_wrapper_refuses_what_the_env_refuses(store: str, name: str, space: str) -> None:
    env = WRAPPERS[name](make_toy(store, action_space=space, use_conditions=False))
    env.reset(seed=0)
    seen = _counted(env)
    n = int(env.action_space.n)
    for action in [*HOSTILE, n]:
        with pytest.raises(InvalidActionError):
            env.step(action)
        with pytest.raises(InvalidActionError):
            env.get_wrapper_attr("peek")(action)
    if name != "none":  # the bare env refuses them itself; a wrapper refuses before it
        assert seen == [], f"{name} let {seen!r} reach the env"
    seen.clear()
    env.step(np.int64(0))  # a valid action still runs (NumPy integers and shape-(1,) arrays too)
    assert len(seen) == 1 and isinstance(seen[0], (int, np.integer))


def test_slot_limit_keeps_its_lenient_skip_for_a_masked_in_range_action(store: str) -> None:
    env = SlotLimit(make_toy(store, action_space="pairs", use_conditions=False), n_slots=0)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([3]))  # slot 3 is hidden: it runs as skip, flagged
    assert info["invalid_action"] is True
