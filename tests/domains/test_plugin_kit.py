"""The plugin kit: the example package installed for real and found through its entry point,
`check_domain` on good and broken domains, duplicate names, entry points naming a module or a
function (called once)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import cm_gym
from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.base import Distillation, ErrorModel, ErrorOperator, PredicateFn
from cm_gym.domains.catalog import load_plugin
from cm_gym.domains.check import DomainCheckError, check_domain
from cm_gym.domains.registry import RegistryError, register_benchmark
from tests.toy_domain import ToyDomain, toy_tasks

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cm_gym_ranges"

PLUGIN_RUN = """
import gymnasium as gym
import numpy as np
import cm_gym
from cm_gym.domains.registry import get_benchmark

spec = get_benchmark("Ranges")
print("ID", spec.env_id)
print(cm_gym.check_domain("Ranges", max_tasks=20).format())
env = gym.make("cm_gym_ranges/Ranges-v0")                  # builds the plugin's default store
solved = 0
for seed in range(12):
    obs, info = env.reset(seed=seed)
    while True:
        action = 1 if info["action_mask"][1] else 0
        obs, reward, term, trunc, info = env.step(action)
        if term or trunc:
            solved += info["solved"]
            break
print("RECORDS", len(env.unwrapped.store), "SOLVED", solved)
"""


@pytest.mark.slow
def test_example_plugin_installs_and_registers_through_its_entry_point(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(target), str(source)], check=True, capture_output=True, timeout=300)
    assert (target / "cm_gym_ranges").is_dir() and list(target.glob("*.dist-info/entry_points.txt"))
    env = {
        **os.environ,
        "PYTHONPATH": str(target),
        "CM_GYM_CACHE": str(tmp_path / "cache"),
        "CM_GYM_STRICT_PLUGINS": "1",  # progress on: the first build is announced on stderr (not a WARNING)
    }
    out = subprocess.run(
        [sys.executable, "-c", PLUGIN_RUN], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "ID cm_gym_ranges/Ranges-v0" in lines and "FAIL" not in out.stdout
    records, solved = (int(x) for x in lines[-1].split()[1::2])
    assert records > 0 and solved > 0
    assert "building the default Ranges store" in out.stderr


# -- check_domain on broken domains -------------------------------------------------------------


class PeekingDomain(ToyDomain):
    """distil reads the hidden reference (and hides it behind try/except)."""

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        try:
            hint = task.reference
        except Exception:  # noqa: BLE001 - swallowing it must not hide the read
            hint = ""
        return Distillation(f"boundary {hint}", "toy_inclusive()")


class MalformedConditionDomain(ToyDomain):
    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return Distillation("boundary", "toy_inclusive( AND")


class AlwaysTrueDomain(ToyDomain):
    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        return Distillation("boundary", 'mentions_any("values")')


class SilentModelDomain(ToyDomain):
    def error_model(self) -> ErrorModel:
        return ErrorModel(operators=(ErrorOperator("never", lambda t: 0.0, lambda t, a, rng: a + " "),))


class WrongReferenceDomain(ToyDomain):
    def make_evaluator(self, **kwargs: object) -> object:
        class Strict:
            def check(self, state: AgentState, action: Action) -> Outcome:
                if not action.text:
                    raise ValueError("empty action")
                return Outcome(0.0, False, "never solved")

        return Strict()


class ShadowingDomain(ToyDomain):
    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return {**super().condition_predicates(), "mentions_any": lambda t, a: True}


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        (PeekingDomain, "distil read task.reference"),
        (MalformedConditionDomain, "malformed condition"),
        (AlwaysTrueDomain, "no distilled condition is false"),
        (SilentModelDomain, "no error operator fires"),
        (WrongReferenceDomain, "reference actions not scored solved"),
        (WrongReferenceDomain, "raised ValueError"),
        (ShadowingDomain, "shadows the built-in"),
    ],
)
def test_check_domain_names_each_broken_contract(domain: type, message: str) -> None:
    report = check_domain(domain(), toy_tasks(), raise_on_failure=False)
    assert not report.ok and any(message in f for f in report.failures), report.format()
    with pytest.raises(DomainCheckError, match="failed"):
        check_domain(domain(), toy_tasks())


def test_check_domain_passes_a_sound_domain_and_needs_tasks() -> None:
    report = cm_gym.check_domain(ToyDomain, toy_tasks())
    assert report.ok and len(report.passed) == 5, report.format()
    with pytest.raises(DomainCheckError, match="needs tasks"):
        check_domain(ToyDomain())


def test_duplicate_domain_names_and_strict_registration() -> None:
    class Impostor(ToyDomain):  # same `name` ("toycmp"), another class
        pass

    register_benchmark("PluginKitToy", domain=ToyDomain, load_tasks=toy_tasks, namespace="cm_gym_test")
    with pytest.raises(RegistryError, match="already used by"):
        register_benchmark(
            "PluginKitImpostor", domain=Impostor, load_tasks=toy_tasks, namespace="cm_gym_test"
        )
    with pytest.raises(DomainCheckError, match="malformed condition"):
        register_benchmark(
            "PluginKitBroken",
            domain=type("BrokenToy", (MalformedConditionDomain,), {"name": "brokentoy"}),
            load_tasks=lambda: [t.__class__(**{**t.__dict__, "domain": "brokentoy"}) for t in toy_tasks()],
            namespace="cm_gym_test",
            strict=True,
        )
    with pytest.raises(RegistryError, match="unknown benchmark"):
        cm_gym.get_benchmark("PluginKitBroken")  # refused, not half-registered


CALLS: list[str] = []


def register_for_test() -> None:
    CALLS.append("called")


def test_entry_points_may_name_a_module_or_a_function() -> None:
    load_plugin(EntryPoint("fn", f"{__name__}:register_for_test", "cm_gym.benchmarks"))
    assert CALLS == ["called"]
    load_plugin(EntryPoint("mod", "tests.toy_domain", "cm_gym.benchmarks"))  # importing is registering
    assert CALLS == ["called"]
    with pytest.raises(RegistryError, match="names a class"):
        load_plugin(EntryPoint("cls", "tests.toy_domain:ToyDomain", "cm_gym.benchmarks"))
