"""`bench/bench_env.py --compare REV`: the current tree against another commit, interleaved
(A B A B …) so that both see the same machine load, each measured from a fresh `gym.make` over its
first decisions — the regime a short training run lives in (issue 35).

Each measurement is its own Python process with ``PYTHONPATH`` at one tree: the working tree (A)
or ``git archive REV`` unpacked into a temporary folder (B). Both share the venv and
``CM_GYM_CACHE`` (the default store each tree builds is cached under its own key; the build is
outside the timing). The rate is decisions per CPU-second of that process (random valid actions,
seeded), which other processes' load distorts far less than wall time; the ratio A/B is printed
per pair and as the median over pairs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: what one measurement runs (in the tree on PYTHONPATH): a fresh env, then `decisions` timed steps
_MEASURE = r"""
import json, sys, time
import gymnasium as gym, numpy as np
import cm_gym  # noqa: F401  (registers the ids)
env_id, decisions, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = gym.make(env_id)
rng = np.random.default_rng(seed)
obs, info = env.reset(seed=seed)
cpu, wall = time.process_time(), time.perf_counter()
for _ in range(decisions):
    obs, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    if term or trunc:
        obs, info = env.reset()
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}))
"""


def _unpack(rev: str, repo: Path, into: Path) -> str:
    """`git archive REV` unpacked into `into`; returns the commit's short hash."""
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short=12", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    archive = into / "rev.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha], check=True, stdout=fh)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    archive.unlink()
    return sha


def _measure(tree: Path, env_id: str, decisions: int, seed: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "CM_GYM_PROGRESS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, env_id, str(decisions), str(seed)],
        check=True, capture_output=True, text=True, env=env, cwd=tree,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(rev: str, env_ids: list[str], decisions: int, pairs: int) -> None:
    """Print, per env id and pair, decisions per CPU-second of A (this tree) and B (`rev`) and A/B."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="cm_gym_rev_") as tmp:
        sha = _unpack(rev, repo, Path(tmp))
        trees = {"A": repo, "B": Path(tmp) / "tree"}
        print(
            f"A = working tree {repo}, B = {rev} ({sha}); {decisions} decisions from a fresh gym.make, {pairs} pairs"
        )
        for env_id in env_ids:
            for tree in trees.values():  # first make of each tree builds its default store: untimed
                _measure(tree, env_id, 1, 0)
            ratios = []
            for i in range(pairs):
                rates = {}
                for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
                    m = _measure(trees[name], env_id, decisions, seed=i)
                    rates[name] = decisions / m["cpu"]
                ratios.append(rates["A"] / rates["B"])
                print(
                    f"{env_id:24s} pair {i}: A {rates['A']:8.1f}/CPU-s  B {rates['B']:8.1f}/CPU-s  A/B {ratios[-1]:.2f}"
                )
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            print(
                f"{env_id:24s} median A/B {statistics.median(ratios):.2f} over {pairs} pairs (1-min load {load:.1f})"
            )
