from __future__ import annotations

import gymnasium as gym
import pytest

import cm_gym
from cm_gym.domains.registry import RegistryError, get_benchmark, register_benchmark
from tests.toy_domain import ToyDomain, toy_tasks


def test_register_refuses_duplicates_and_exposes_gym_id() -> None:
    spec = register_benchmark("RegistryToy", domain=ToyDomain, load_tasks=toy_tasks, namespace="cm_gym_test")
    assert spec.env_id == "cm_gym_test/RegistryToy-v0" and spec.env_id in gym.registry
    assert get_benchmark("RegistryToy") is spec and get_benchmark(spec.env_id) is spec
    with pytest.raises(RegistryError, match="already registered"):
        register_benchmark("RegistryToy", domain=ToyDomain, load_tasks=toy_tasks)
    assert cm_gym.get_domain("toycmp").name == "toycmp"


def test_unknown_names_give_clear_errors() -> None:
    with pytest.raises(RegistryError, match="unknown benchmark"):
        get_benchmark("NoSuchBenchmark")
    with pytest.raises(RegistryError, match="unknown domain"):
        cm_gym.get_domain("no-such-domain")
