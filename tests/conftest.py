"""Shared fixtures: the real-data folder (skipped outside CI when absent, a failure in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cm_gym.paths import DataNotFoundError, data_root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark subsets (../shared/data or $CM_GYM_DATA)."""
    try:
        return data_root()
    except DataNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"real data missing in CI: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep caches out of the user's home unless the run already chose a cache dir."""
    if not os.environ.get("CM_GYM_CACHE"):
        monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path_factory.getbasetemp() / "cm_gym_cache"))
