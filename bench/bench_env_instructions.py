"""Instructions, not seconds: the decision loop of the current tree against another commit,
counted under valgrind's callgrind (issue 35).

Why: on this shared 2-core machine one tree's CPU time moves by ±15% from one process to the next,
so an interleaved `bench_env.py --compare` needs many pairs to see a 5–10% change (eight pairs
gave medians from 0.99 to 1.26 for one change on one day). An instruction count is the same from
run to run (``PYTHONHASHSEED=0``, the same seed, the same cache), whatever else the machine runs.
It is not time — a system call, a cache miss and a page fault count as nothing — so it ranks
changes to Python-level work, which is what this loop is; report it beside the CPU-time pairs.

What it runs, per tree (A = a copy of this working tree as it is at the start, B = ``git archive REV``):
1. in a temporary cache folder, a fresh `gym.make` builds the default store, then a process with
   seed 10,000 leaves its work memo (the regime `bench_env.py --compare` calls *warm*);
2. a copy of that folder (timestamps kept) is put back at the same path before each counted run:
   a SQL task names its database by path, and the memo keys hold the task;
3. callgrind counts the whole process for `--decisions` decisions with `--seed`, then for one
   decision; the loop is the difference (imports, `gym.make` and the first reset cancel out).

With ``--cold`` step 1 leaves no memo: the work memo folder is deleted after the store is built
(the regime `bench_env.py --compare` calls *cold*: every pair a process meets is computed anew).

Usage: ``python bench/bench_env_instructions.py --compare 898acb2`` (about 10 minutes a tree for
2,000 SQL-v0 decisions; valgrind slows Python about 50x). Needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env_compare import _MEASURE, _snapshot, _unpack  # noqa: E402


def _run(tree: Path, cache: Path, env_id: str, decisions: int, seed: int, valgrind: bool) -> int | None:
    """One measurement process in `tree`; under callgrind, the instructions it executed."""
    env = {**os.environ, "PYTHONPATH": str(tree), "CM_GYM_PROGRESS": "0", "CM_GYM_CACHE": str(cache),
           "PYTHONHASHSEED": "0"}  # fmt: skip
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the priming runs write the tree's bytecode
    cmd = [sys.executable, "-c", _MEASURE, env_id, str(decisions), str(seed)]
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cache.parent / 'callgrind.out'}", *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=tree)
    if not valgrind:
        return None
    found = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def loop_instructions(
    tree: Path, work: Path, env_id: str, decisions: int, seed: int, cold: bool = False
) -> int:
    """Instructions of `decisions` decisions from a fresh `gym.make` in `tree` (module doc)."""
    cache, snapshot = work / "cache", work / "cache.snapshot"
    _run(tree, cache, env_id, 1, 0, valgrind=False)  # builds the default store
    if cold:
        shutil.rmtree(cache / "work", ignore_errors=True)
    else:
        _run(tree, cache, env_id, decisions, 10_000, valgrind=False)  # the memo one other run leaves
    shutil.copytree(cache, snapshot, symlinks=True)  # copy2: modification times kept
    counts = {}
    for n in (decisions, 1):
        shutil.rmtree(cache)
        shutil.copytree(snapshot, cache, symlinks=True)
        counts[n] = _run(tree, cache, env_id, n, seed, valgrind=True)
        print(f"  {tree}: {n} decision(s): {counts[n]:,} instructions", flush=True)
    return int(counts[decisions]) - int(counts[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", required=True, metavar="REV", help="the commit to count against")
    parser.add_argument("--id", default="cm_gym/SQL-v0", help="the env id")
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cold", action="store_true", help="no work memo: every pair computed anew")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_env_instructions: valgrind is not on PATH")
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="cm_gym_instr_") as tmp:
        sha = _unpack(args.compare, repo, Path(tmp))
        loops = {}
        for name, tree in (("A", _snapshot(repo, Path(tmp))), ("B", Path(tmp) / "tree")):
            (Path(tmp) / name).mkdir()
            loops[name] = loop_instructions(
                tree, Path(tmp) / name, args.id, args.decisions, args.seed, args.cold
            )
        a, b = loops["A"], loops["B"]
        print(
            f"{args.id}, {args.decisions} decisions, seed {args.seed}, "
            f"{'cold (no memo)' if args.cold else 'warm (the memo of one other run)'}: "
            f"A (working tree) {a / 1e6:,.1f} M instructions, B ({args.compare}, {sha}) {b / 1e6:,.1f} M; "
            f"A/B {a / b:.3f}; per decision A {a / args.decisions / 1e3:,.0f} k, B {b / args.decisions / 1e3:,.0f} k"
        )


if __name__ == "__main__":
    main()
