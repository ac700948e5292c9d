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


#: import lines that worked before names moved between modules (issue 33); each must keep working
OLD_IMPORT_LINES = [
    "from cm_gym.llm.cache import CachedLLM",
    "from cm_gym.llm.cache import backend_identity, SCHEMA_NAME, SCHEMA_VERSION",
    "from cm_gym.llm.batch import CachedLLM, CallRequest",
    "from cm_gym.llm.prompts import fenced",
    "from cm_gym.memory.store import open_store",
    "from cm_gym.memory.snapshot import open_store",
    "from cm_gym.domains.dafny.edits import guard_invariants, dafny_error_model, SLIP_RATES, weak_bound",
    "from cm_gym.domains.smt.smtlib import smtlib_task, load_smtlib_tasks, reference_config, LOGIC_DIRS",
    "from cm_gym.domains.sat.dimacs import satlib_task, load_satlib_tasks, FamilyInfo, FAMILIES",
    "from cm_gym.domains.sql.evaluator import MAX_VALUE_BYTES",
    "from cm_gym.evaluators.isolation import CLONE_NEWUSER, PR_SET_PDEATHSIG",
    "from cm_gym.analysis.real_errors import compare, collectors",
    "from cm_gym.studies.analysis.real_errors import compare, collectors",
    "from cm_gym.version import __version__",
    "from cm_gym.plugins import resolve, register",
    "from cm_gym.catalog import get_benchmark",
]


@pytest.mark.parametrize("line", OLD_IMPORT_LINES)
def test_old_import_lines_of_moved_names_still_work(line: str) -> None:
    from cm_gym._compat import MOVED_NAMES

    namespace: dict[str, object] = {}
    exec(line, namespace)  # noqa: S102 - the old import line itself is what is under test
    module = line.split()[1]
    table = MOVED_NAMES.get(new_name(module) or module, {})
    for name in line.split(" import ", 1)[1].split(", "):
        home = table.get(name)
        if home is not None:  # the same object as under its new home, not a copy
            assert namespace[name] is getattr(importlib.import_module(home), name)


def test_old_import_lines_work_in_a_fresh_interpreter() -> None:
    """The forwarding is installed by the loader of each module (no earlier import needed)."""
    import subprocess

    code = "\n".join(["import cm_gym", *OLD_IMPORT_LINES, "print('ok')"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_forwarding_keeps_unknown_names_an_import_error() -> None:
    with pytest.raises(ImportError, match="no_such_name"):
        exec("from cm_gym.llm.cache import no_such_name", {})  # noqa: S102
    with pytest.raises(ImportError):
        exec("from cm_gym.domains.sat.dimacs import DEFAULT_ALLOWANCE", {})  # noqa: S102 - removed, not moved
