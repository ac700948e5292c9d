"""Fixtures for env tests (the toy benchmark is registered by importing `toy_env`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.envs.toy_env import TOY_BENCHMARK, TOY_ENV_ID, build_toy_store, make_toy

torch.set_num_threads(1)

__all__ = ["TOY_BENCHMARK", "TOY_ENV_ID", "build_toy_store", "make_toy"]


@pytest.fixture(scope="session")
def toy_store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_toy_store(tmp_path_factory.mktemp("toystore") / "toy.sqlite")
