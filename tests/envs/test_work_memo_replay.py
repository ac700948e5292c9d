"""The persistent work memo changes nothing an env returns (issue 35): the same decisions of
SQL-v0 — observations, masks, rewards, infos — in three fresh processes sharing one cache, with
the memo off, empty (cold) and left by the cold one (warm); the warm one must read from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import hashlib, json, sys
import numpy as np
import cm_gym  # noqa: F401
from cm_gym.domains.sql import workmemo
from cm_gym.envs.selection import MemorySelectionEnv
env = MemorySelectionEnv(benchmark="SQL")
rng = np.random.default_rng(5)
out = []
obs, info = env.reset(seed=5)
for _ in range(300):
    action = int(rng.choice(np.flatnonzero(info["action_mask"])))
    obs, reward, term, trunc, info = env.step(action)
    plain = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()}
    out.append([action, obs.tolist(), float(reward), term, trunc, json.dumps(plain, sort_keys=True, default=str)])
    if term or trunc:
        obs, info = env.reset()
digest = hashlib.sha256(json.dumps(out).encode()).hexdigest()
print(json.dumps({"digest": digest, "hits": workmemo.sql_work().hits, "verdicts": env.evaluator.memo.stored_hits}))
"""


def _run(cache: Path, memo: str) -> dict[str, object]:
    env = {**os.environ, "CM_GYM_CACHE": str(cache), "CM_GYM_WORK_MEMO": memo, "CM_GYM_PROGRESS": "0"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_decisions_are_identical_with_the_memo_off_cold_and_warm(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    off = _run(cache, "0")  # also builds the default store (with the memo off)
    assert not (cache / "work").exists()
    cold = _run(cache, "1")
    warm = _run(cache, "1")
    assert off["digest"] == cold["digest"] == warm["digest"]
    assert warm["hits"] > cold["hits"] and warm["verdicts"] > 0
