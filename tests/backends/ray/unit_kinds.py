"""Unit kinds for the Ray backend tests; Ray workers import this module (``imports=``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cm_gym.studies.experiments.runner import UnitResult, unit_kind


@unit_kind("ray_test_sum")
def add_up(params: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """x + the inputs' totals; writes an artefact the way real units do."""
    total = int(params["x"]) + sum(int(r["total"]) for r in inputs.values())
    (workdir / "total.txt").write_text(str(total))
    for r in inputs.values():  # an input's artefact must be readable where this unit runs
        assert r.path("artefact").read_text() == str(r["total"])
    return {"total": total, "artefact": "total.txt", "pid": os.getpid()}


@unit_kind("ray_test_dies_once")
def dies_once(params: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    """The first attempt kills its own worker process (SIGKILL: no cleanup runs); the retry works."""
    marker = Path(params["marker"])
    attempts = int(marker.read_text()) + 1 if marker.exists() else 1
    marker.write_text(str(attempts))
    if attempts == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    (workdir / "total.txt").write_text("7")
    return {"total": 7, "artefact": "total.txt", "attempts": attempts}


@unit_kind("ray_test_fails")
def fails(params: Mapping[str, Any], inputs: Mapping[str, UnitResult], workdir: Path) -> dict[str, Any]:
    raise ValueError("the unit's own error")
