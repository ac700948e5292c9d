"""First ``gym.make`` of every registered id: CPU and wall seconds, records in its default store,
build tasks, and how many of the first 200 random-valid decisions had an action besides skip.

    python bench/bench_first_make.py [--ids cm_gym/SQL-v0 ...] [--timeout 480] [--decisions 200]

Each id runs in a fresh interpreter on a fresh temporary ``CM_GYM_CACHE``, so its default store is
built as a user's first ``gym.make`` builds it. CPU seconds are the child's
``getrusage(RUSAGE_SELF) + getrusage(RUSAGE_CHILDREN)`` delta around ``gym.make`` plus the CPU of
descendants still alive at its end (an evaluator's worker pool, and what those workers reaped:
dafny, coqc, sandboxed tests; needs psutil, else they are not counted); wall seconds are ``time.perf_counter`` around the same
call. An id whose make runs past ``--timeout`` seconds of wall is reported as "> N min". Prints a
Markdown table (the one in docs/env-spec.md) and the load average at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

#: What the child runs: the first make, its CPU/wall, the store, the build summary, and the share
#: of decisions with a non-skip valid action over random-valid play.
CHILD = r"""
import json, resource, sys, time
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime + live()
def live():  # descendants still running (an evaluator's worker pool) and what they reaped
    try:
        import psutil
    except ImportError:
        return 0.0
    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total
import gymnasium as gym, numpy as np
import cm_gym
from cm_gym.memory.summary import BuildSummary
env_id, decisions = sys.argv[1], int(sys.argv[2])
c0, w0 = cpu(), time.perf_counter()
env = gym.make(env_id)
cpu_s, wall_s = cpu() - c0, time.perf_counter() - w0
store = env.unwrapped.store
summary = BuildSummary.from_counters(store.counters)
made = {
    "cpu_s": cpu_s, "wall_s": wall_s, "records": len(store.records), "build_tasks": summary.tasks,
    "solved": summary.solved, "failures_expanded": summary.failures_expanded,
    "rejected": summary.rejected,
}
print("MADE " + json.dumps(made), flush=True)
rng = np.random.default_rng(0)
obs, info = env.reset(seed=0)
with_record = 0
for _ in range(decisions):
    mask = info["action_mask"]
    with_record += bool(mask[1:].any())
    obs, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
    if term or trunc:
        obs, info = env.reset()
print("RESULT " + json.dumps({**made, "decisions": decisions, "with_record": with_record}))
"""

#: slow first (dafny, coq) last: the fast ones finish whatever happens to the slow ones
ORDER_LAST = ("Dafny", "MiniF2F")


def registered_ids() -> list[str]:
    import gymnasium as gym

    import cm_gym  # noqa: F401  (registers the env ids)

    ids = sorted(i for i in gym.registry if i.startswith("cm_gym/"))
    return sorted(ids, key=lambda i: any(s in i for s in ORDER_LAST))


def measure(env_id: str, decisions: int, timeout: float) -> dict:
    """One id's first make in a fresh interpreter on an empty cache (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="cm-gym-first-make-") as cache:
        env = dict(os.environ, CM_GYM_CACHE=cache, CM_GYM_PROGRESS="0")
        try:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, env_id, str(decisions)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # the make may have finished, the decisions not
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
            made = [json.loads(x[len("MADE ") :]) for x in stdout.splitlines() if x.startswith("MADE ")]
            late = f"> {timeout / 60:.0f} min"
            if made:
                return {"id": env_id, **made[0], "decisions": decisions, "with_record": late}
            return {"id": env_id, "error": late}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return {"id": env_id, **json.loads(line[len("RESULT ") :])}
    return {"id": env_id, "error": f"failed (rc {out.returncode}): {out.stderr.strip()[-300:]}"}


def row(r: dict) -> str:
    if "error" in r:
        return f"| `{r['id']}` | {r['error']} | | | | |"
    return (
        f"| `{r['id']}` | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {r['records']} | {r['build_tasks']} "
        f"| {r['with_record']} of {r['decisions']} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="+", default=None, help="env ids (default: every registered id)")
    parser.add_argument("--decisions", type=int, default=200, help="random-valid decisions after the make")
    parser.add_argument("--timeout", type=float, default=480.0, help="wall seconds per id before giving up")
    parser.add_argument("--json", default=None, help="also write the raw results to this file")
    args = parser.parse_args()
    ids = args.ids or registered_ids()
    load0 = os.getloadavg()
    results = []
    for env_id in ids:
        r = measure(env_id, args.decisions, args.timeout)
        print(json.dumps(r), file=sys.stderr, flush=True)
        results.append(r)
    load1 = os.getloadavg()
    print(f"load average (1, 5, 15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at start, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at end; {os.cpu_count()} CPUs")  # fmt: skip
    print()
    print("| id | first make CPU s | wall s | records | build tasks | decisions with a record |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(row(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": [load0, load1], "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
