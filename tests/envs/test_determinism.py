"""Same seed → same episode, also across processes with different hash seeds (no hidden reliance
on Python's salted hash or on process state)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs.toy_env import build_toy_store

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import hashlib, sys
import numpy as np
import gymnasium as gym
import cm_gym
benchmark, store = sys.argv[1], (sys.argv[2] or None)
if benchmark == "EnvToy":
    import tests.envs.toy_env  # registers the toy benchmark
from cm_gym.envs.selection import MemorySelectionEnv
env = MemorySelectionEnv(benchmark=benchmark, store=store)
h = hashlib.sha256()
rng = np.random.default_rng(0)
obs, info = env.reset(seed=123)
for _ in range(40):
    h.update(obs.tobytes()); h.update(info["task_id"].encode())
    a = int(rng.choice(np.flatnonzero(info["action_mask"])))
    obs, r, term, trunc, info = env.step(a)
    h.update(repr((round(float(r), 9), term, info["action"], info["record_id"])).encode())
    if term or trunc:
        obs, info = env.reset()
print(h.hexdigest())
"""


def _trace(benchmark: str, store: str, hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, benchmark, store],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_toy_episode_identical_across_processes(tmp_path: Path) -> None:
    store = str(build_toy_store(tmp_path / "toy.sqlite"))
    assert _trace("EnvToy", store, "1") == _trace("EnvToy", store, "2")


@pytest.mark.slow
def test_sql_episode_identical_across_processes() -> None:
    """The generated SQL benchmark with its default snapshot (built once, then reused)."""
    assert _trace("SQL", "", "1") == _trace("SQL", "", "2")
