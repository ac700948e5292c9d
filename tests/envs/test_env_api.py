"""The env's API edges (issue 12 items 1/6, issue 14 item 6): strict actions, validated reset
options and reward weights, ``rgb_array`` rendering, plain pickle mid-episode."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env as gym_check_env

from cm_gym.envs import EnvConfigError, InvalidActionError, MemorySelectionEnv
from cm_gym.envs._render import frame_shape
from tests.envs.toy_env import TOY_BENCHMARK, TOY_ENV_ID

INCLUSIVE = "toy-004"


def make(store: Path, **kw: object) -> MemorySelectionEnv:
    kw.setdefault("tasks", "all")
    return MemorySelectionEnv(benchmark=TOY_BENCHMARK, store=store, **kw)


NOT_ACTIONS = [
    7,
    -1,
    5,
    1.0,
    1.5,
    math.inf,
    math.nan,
    "1",
    None,
    [1],
    True,
    np.bool_(False),
    np.array([1, 2]),
    np.array([], dtype=np.int64),
    np.array(1.0),
    np.float32(2.0),
    np.int64(9),
]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("action", NOT_ACTIONS, ids=lambda a: repr(a)[:20])
def test_anything_but_an_in_range_integer_raises_in_every_mode(
    toy_store_path: Path, action: object, strict: bool
) -> None:
    env = make(toy_store_path, strict_actions=strict)
    env.reset(options={"task_id": INCLUSIVE})
    with pytest.raises(InvalidActionError) as err:
        env.step(action)
    message = str(err.value)
    assert "\n" not in message and "0..4" in message
    assert env._decisions == 0 and env._calls == 0  # nothing ran
    with pytest.raises(InvalidActionError):
        env.peek(action)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "action", [1, np.int64(1), np.int32(1), np.uint8(1), np.array(1), np.array([1]), torch.tensor(1)]
)
def test_integer_forms_are_accepted(toy_store_path: Path, action: object) -> None:
    env = make(toy_store_path)
    _, info = env.reset(options={"task_id": INCLUSIVE})
    assert info["action_mask"][1]
    _, _, _, _, info = env.step(action)
    assert info["selected"] == 1 and not info["invalid_action"]


def test_reset_options_are_validated(toy_store_path: Path) -> None:
    env = make(toy_store_path)
    for bad in (["task_id", INCLUSIVE], "toy-004", 3):
        with pytest.raises(EnvConfigError, match="must be a dict"):
            env.reset(options=bad)  # type: ignore[arg-type]
    with pytest.raises(EnvConfigError, match=r"unknown reset option.*taskid"):
        env.reset(options={"taskid": INCLUSIVE})
    assert env.reset(options={})[1]["task_id"]
    assert env.reset(options=None)[1]["task_id"]


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ({"calls": math.nan}, "finite"),
        ({"tokens": math.inf}, "finite"),
        ({"failures": -0.25}, ">= 0"),
        ({"solve": 0.0}, "> 0"),
        ({"token_scale": 0}, "> 0"),
        ({"calls": "0.15"}, "number"),
        ({"calls": True}, "number"),
        ({"bonus": 1.0}, "unknown reward weight"),
        ([("calls", 0.1)], "must be a dict"),
    ],
)
def test_reward_weights_are_validated(toy_store_path: Path, weights: object, match: str) -> None:
    with pytest.raises(EnvConfigError, match=match):
        make(toy_store_path, reward_weights=weights)


def test_numeric_arguments_are_validated(toy_store_path: Path) -> None:
    for kw, match in (
        ({"max_decisions": 0}, "max_decisions"),
        ({"max_decisions": 2.5}, "integer"),
        ({"k": True}, "integer"),
        ({"token_budget": 0}, "token_budget"),
        ({"max_evaluator_calls": -1}, "max_evaluator_calls"),
        ({"render_mode": "human"}, "render_mode"),
    ):
        with pytest.raises(EnvConfigError, match=match):
            make(toy_store_path, **kw)
    env = make(toy_store_path, reward_weights={"tokens": 0.0, "calls": 0})
    assert env.reward_weights["tokens"] == 0.0 and env.reward_weights["solve"] == 1.0


@pytest.mark.filterwarnings("ignore:.*Box observation space (minimum|maximum) value")
def test_rgb_array_frames_show_the_decision(toy_store_path: Path) -> None:
    env = gym.make(TOY_ENV_ID, store=toy_store_path, tasks="all", render_mode="rgb_array")
    gym_check_env(env.unwrapped)  # includes Gymnasium's render check
    env.reset(options={"task_id": INCLUSIVE})
    first = env.render()
    assert isinstance(first, np.ndarray) and first.dtype == np.uint8 and first.shape == frame_shape()
    assert (first != first[0, 0]).any()  # text was drawn
    env.step(1)
    second = env.render()
    assert second.shape == first.shape and not np.array_equal(first, second)
    ansi = make(toy_store_path, render_mode="ansi")
    ansi.reset(options={"task_id": INCLUSIVE})
    assert "slot 1:" in ansi.render()


def _continue(env: gym.Env, actions: list[int]) -> list[tuple[bytes, float, bool, str]]:
    out = []
    for a in actions:
        obs, reward, term, _, info = env.step(a)
        out.append((obs.tobytes(), float(reward), term, str(info["record_id"])))
        if term:
            obs, info = env.reset()
            out.append((obs.tobytes(), 0.0, False, info["task_id"]))
    return out


def test_pickle_round_trips_mid_episode(toy_store_path: Path) -> None:
    env = gym.make(TOY_ENV_ID, store=toy_store_path, tasks="all", llm="simulated")
    env.reset(seed=11)
    env.step(0)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.unwrapped._task.task_id == env.unwrapped._task.task_id
    np.testing.assert_array_equal(copy.unwrapped.action_masks(), env.unwrapped.action_masks())
    actions = [1, 0, 2, 0, 1, 0, 0, 1]
    assert _continue(copy, actions) == _continue(env, actions)  # same episode, same RNG afterwards
    again = pickle.loads(pickle.dumps(copy.unwrapped))
    assert again.store.manifest["sha256"] == env.unwrapped.store.manifest["sha256"]


def test_revise_mode_is_an_argument(toy_store_path: Path) -> None:
    """``revise="transform"`` (issue 32 item 5) reaches the agent; an unknown mode is refused; a
    domain without transforms leaves the draft as it was (no LLM revision is asked for)."""
    with pytest.raises(EnvConfigError, match="revise"):
        make(toy_store_path, revise="magic")
    env = make(toy_store_path, revise="transform")
    assert env._agent.revise_mode == "transform"
    assert make(toy_store_path)._agent.revise_mode == "llm"
    env.reset(seed=0)
    assert env.action_masks()[1:].any(), "the toy store offers a record to show"
    valid = [a for a in range(env.action_space.n) if env.action_masks()[a] and a > 0]
    _, _, _, _, info = env.step(valid[0])
    assert not info["changed_by_memory"] and info["action"] == info["draft"]
