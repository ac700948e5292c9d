"""Math without Coq: registration and task loading work, and creating the evaluator is one clear
`ToolNotFoundError` naming the install command."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from cm_gym.core.types import CmGymError
from cm_gym.domains.math.coqtool import find_coqc
from cm_gym.domains.math.domain import MathDomain
from cm_gym.evaluators.sandbox import ToolNotFoundError


def test_missing_coqc_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CM_GYM_COQC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolNotFoundError, match="apt-get install -y coq") as info:
        find_coqc()
    assert isinstance(info.value, CmGymError)
    with pytest.raises(ToolNotFoundError, match="apt-get install -y coq"):
        MathDomain().make_evaluator()
    monkeypatch.setenv("CM_GYM_COQC", str(tmp_path / "nope"))
    with pytest.raises(ToolNotFoundError, match="CM_GYM_COQC"):
        MathDomain().make_evaluator()
    assert "cm_gym/MiniF2F-v0" in gym.registry
