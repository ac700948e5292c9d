"""Import paths from before the layer packages (issue 24) still work, as the same module objects."""

from __future__ import annotations

import importlib
import pickle
import sys

import pytest

import cm_gym
from cm_gym._compat import ALIASES, new_name

#: modules users may hold by their old path (the issue's list), beyond the aliased names themselves
OLD_SUBMODULES = [
    "cm_gym.envs.selection",
    "cm_gym.agents.masked_dqn",
    "cm_gym.agent",
    "cm_gym.memory.store",
    "cm_gym.memory.snapshot",
    "cm_gym.memory.retrieval",
    "cm_gym.memory.construction",
    "cm_gym.memory.defaults",
    "cm_gym.memory.conditions",
    "cm_gym.memory.errors",
    "cm_gym.experiments.runner",
    "cm_gym.experiments.units",
    "cm_gym.experiments.stats",
    "cm_gym.mechanisms.base",
    "cm_gym.mechanisms.countermem",
    "cm_gym.analysis.calibrate",
    "cm_gym.ray_backend.rllib",
    "cm_gym.ray_backend.experiments",
    "cm_gym.wrappers.masking",
    "cm_gym.wrappers.metrics",
]


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_every_old_name_is_the_module_of_its_new_name(old: str) -> None:
    module = importlib.import_module(old)
    assert module is importlib.import_module(ALIASES[old])
    assert sys.modules[old] is module


@pytest.mark.parametrize("old", OLD_SUBMODULES)
def test_old_submodule_paths_import_the_same_objects(old: str) -> None:
    module = importlib.import_module(old)
    assert module is importlib.import_module(new_name(old) or old)


def test_old_names_share_classes_and_monkeypatching(monkeypatch: pytest.MonkeyPatch) -> None:
    from cm_gym.types import Task as OldTask

    from cm_gym.core.types import Task

    assert OldTask is Task
    import cm_gym.features as old

    import cm_gym.envs.features as new

    monkeypatch.setattr(old, "OBS_LAYOUTS", ("patched",))
    assert new.OBS_LAYOUTS == ("patched",)


def test_pickles_naming_old_modules_still_load() -> None:
    from cm_gym.core.types import Split

    split = Split(build=("a",), train=("b",), validation=(), eval=("c",))
    text = pickle.dumps(split, protocol=0)
    assert b"cm_gym.core.types" in text
    old = text.replace(b"cm_gym.core.types", b"cm_gym.types")
    assert pickle.loads(old) == split


def test_unknown_names_still_fail_and_new_names_resolve() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("cm_gym.no_such_module_here")
    assert new_name("cm_gym.experiments.runner") == "cm_gym.studies.experiments.runner"
    assert new_name("cm_gym.envs.selection") is None
    assert cm_gym.__version__
