"""`bench/bench_env.py --compare REV`: the current tree against another commit, interleaved
(A B A B …) so that both see the same machine load, each measured from a fresh `gym.make` over its
first decisions — the regime a short training run lives in (issue 35).

Each measurement is its own Python process with ``PYTHONPATH`` at one tree: a copy of the working
tree as it is when the bench starts (A, `_snapshot`) or ``git archive REV`` unpacked into a
temporary folder (B). Each tree has its own fresh
temporary ``CM_GYM_CACHE`` (its default store is built there outside the timing): two trees
whose work memos share a version (an unchanged package) never read each other's, and deleting
one's memo never empties the other's. The rate is decisions per CPU-second of that process and its checking
workers (from ``/proc``; random valid actions, seeded), which other processes' load distorts far less than wall time; the ratio A/B is printed
per pair and as the median over pairs.

Each tree is measured twice per pair: *warm*, with the persistent work memo
(`cm_gym.core.workmemo`) that the tree's previous process (another seed) left in its cache —
every process after the first on a machine — and *cold*, with the memo folder deleted first — the
first process ever (it still writes the memo). A/B is printed warm against warm and cold against
cold; a commit without the memo has warm = cold. (Until the seventh round both trees shared one
cache: B read A's memo files whose version it shared — the embeddings' — and A's cold run deleted
B's memo, so B was neither warm nor cold.) Each tree's *start* is printed too: the CPU seconds
from the interpreter's start to the first decision (imports, `gym.make` with its store already
built, the first `reset`), the median over its warm runs — what every new process (a run, a
vector env's worker, a test) pays before its first decision.

`series` (``bench_env.py --series N``) times processes 1..N on one fresh cache instead: the first
process ever on a machine (it builds the default store), the second (the *warm* above), and so on,
each from a fresh `gym.make` over its first decisions.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def children_cpu() -> float:
    """CPU seconds of this process's children: the live ones (the checking workers of SAT, SMT
    and unbounded SQL queries) from ``/proc``, plus what reaped ones used."""
    import os
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                pids = fh.read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                pass
    return total


#: what one measurement runs (in the tree on PYTHONPATH): a fresh env, then `decisions` timed
#: steps; its CPU includes the env's checking workers (`children_cpu`, sent along as source)
_MEASURE = (
    inspect.getsource(children_cpu)
    + r"""
import json, sys, time
import gymnasium as gym, numpy as np
import cm_gym  # noqa: F401  (registers the ids)
env_id, decisions, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = gym.make(env_id)
rng = np.random.default_rng(seed)
obs, info = env.reset(seed=seed)
cpu, kids, wall = time.process_time(), children_cpu(), time.perf_counter()
for _ in range(decisions):
    obs, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    if term or trunc:
        obs, info = env.reset()
kids = children_cpu() - kids
print(json.dumps({"cpu": time.process_time() - cpu + kids, "workers_cpu": kids,
                  "wall": time.perf_counter() - wall, "start_cpu": cpu}))
"""
)


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


def _snapshot(repo: Path, into: Path) -> Path:
    """A copy of the working tree `repo` (its tracked files and the untracked ones git does not
    ignore, as they are now) in ``into/worktree``: the tree A is timed in. A bench runs for
    minutes; an edit made meanwhile would change A between its runs (and the source digests
    that version its work memo and default store with it)."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True,
    ).stdout.decode("utf-8", "surrogateescape")  # fmt: skip
    tree = into / "worktree"
    for name in filter(None, listed.split("\0")):
        source = repo / name
        if source.is_file() and not source.is_symlink():  # (a tracked file deleted since: gone)
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    return tree


def _measure(tree: Path, env_id: str, decisions: int, seed: int, cache: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "CM_GYM_PROGRESS": "0", "CM_GYM_CACHE": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # else B's unpacked tree compiles every import, every run
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, env_id, str(decisions), str(seed)],
        check=True, capture_output=True, text=True, env=env, cwd=tree,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(rev: str, env_ids: list[str], decisions: int, pairs: int) -> None:
    """Print, per env id and pair, decisions per CPU-second of A and B (`rev`), each warm and
    cold, and the ratios A/B warm and A/B cold."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="cm_gym_rev_") as tmp:
        sha = _unpack(rev, repo, Path(tmp))
        trees = {"A": _snapshot(repo, Path(tmp)), "B": Path(tmp) / "tree"}
        caches = {name: Path(tmp) / f"cache-{name}" for name in trees}
        print(
            f"A = working tree {repo} (copied at the start), B = {rev} ({sha}); {decisions} decisions from a fresh gym.make, "
            f"{pairs} pairs; warm = with the work memo the tree's previous run (another seed) left, "
            "cold = that memo deleted first (a tree without one: warm = cold)"
        )
        for env_id in env_ids:
            for name, tree in trees.items():  # the first make builds the default store: untimed
                _measure(tree, env_id, 1, 0, caches[name])
                _measure(tree, env_id, decisions, 10_000, caches[name])  # the memo one run leaves
            warm, cold = [], []
            start: dict[str, list[float]] = {"A": [], "B": []}
            for i in range(pairs):
                rates = {}
                # each tree's cold run comes after its warm one: it deletes the memo and leaves its
                # own, so every warm run reads what one run with another seed left
                sides = ("A", "B") if i % 2 == 0 else ("B", "A")
                for kind in ("warm", "cold"):
                    for name in sides:
                        if kind == "cold":
                            shutil.rmtree(caches[name] / "work", ignore_errors=True)
                        m = _measure(trees[name], env_id, decisions, i, caches[name])
                        rates[f"{name} {kind}"] = decisions / m["cpu"]
                        if kind == "warm" and "start_cpu" in m:
                            start[name].append(m["start_cpu"])
                warm.append(rates["A warm"] / rates["B warm"])
                cold.append(rates["A cold"] / rates["B cold"])
                print(
                    f"{env_id:24s} pair {i}: A warm {rates['A warm']:7.1f}  B warm {rates['B warm']:7.1f}  "
                    f"A cold {rates['A cold']:7.1f}  B cold {rates['B cold']:7.1f} /CPU-s  "
                    f"A/B warm {warm[-1]:.2f} cold {cold[-1]:.2f}"
                )
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            print(
                f"{env_id:24s} median A/B warm {statistics.median(warm):.2f}, cold {statistics.median(cold):.2f} "
                f"over {pairs} pairs (1-min load {load:.1f})"
            )
            print(
                f"{env_id:24s} start (imports, gym.make with its store built, the first reset), CPU-s, "
                f"warm runs: A median {statistics.median(start['A']):.2f}, B {statistics.median(start['B']):.2f}"
            )


def series(rev: str | None, env_ids: list[str], decisions: int, processes: int) -> None:
    """Print, per env id, decisions per CPU-second of process 1, 2, … `processes` on a machine:
    each a fresh process (seed k) with a fresh `gym.make`, over its first `decisions` decisions,
    in one fresh cache that every process leaves its work memo in. Process 1 builds the default
    store in its `gym.make` (untimed, but that build fills part of the memo: the first process
    ever). With `rev`, the same series of that commit runs interleaved (A1 B1 A2 B2 …), each
    tree in its own cache, and the ratio is printed per process."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="cm_gym_series_") as tmp:
        trees = {"A": _snapshot(repo, Path(tmp))}
        label = f"A = working tree {repo} (copied at the start)"
        if rev is not None:
            trees["B"] = Path(tmp) / "tree"
            label += f", B = {rev} ({_unpack(rev, repo, Path(tmp))})"
        print(
            f"{label}; process k on a machine (seed k): a fresh process, gym.make and {decisions} "
            "decisions in a cache the earlier processes left (process 1 builds the default store)"
        )
        for env_id in env_ids:
            caches = {name: Path(tmp) / f"cache-{name}-{env_id.replace('/', '_')}" for name in trees}
            for k in range(1, processes + 1):
                rates = {}
                for name in trees if k % 2 else reversed(trees):
                    m = _measure(trees[name], env_id, decisions, k, caches[name])
                    rates[name] = (decisions / m["cpu"], m["start_cpu"])
                line = "  ".join(
                    f"{n} {r:7.1f} /CPU-s (start {c:.2f} s)" for n, (r, c) in sorted(rates.items())
                )
                ratio = f"  A/B {rates['A'][0] / rates['B'][0]:.2f}" if "B" in rates else ""
                print(f"{env_id:24s} process {k}: {line}{ratio}", flush=True)
