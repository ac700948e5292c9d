"""Shared fixtures: the real-data folder (skipped outside CI when absent, a failure in CI)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from cm_gym.core.paths import DataNotFoundError, data_root

# Keep caches (generated databases, default stores) out of the user's home unless the run already
# chose a cache dir; set at import so that session-scoped fixtures see it too.
if not os.environ.get("CM_GYM_CACHE"):
    os.environ["CM_GYM_CACHE"] = tempfile.mkdtemp(prefix="cm_gym_test_cache_")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark subsets (../shared/data or $CM_GYM_DATA)."""
    try:
        return data_root()
    except DataNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"real data missing in CI: {exc}")
        pytest.skip(str(exc))
