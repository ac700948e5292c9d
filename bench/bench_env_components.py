"""Where a fresh process's decisions go: CPU seconds inside each named component of the decision
loop, from a fresh `gym.make` over its first decisions (issue 35).

A sampling profiler misled us here: py-spy at 1 kHz put SQL tree copies at 10.7% of a first
SQL-v0 process's loop, when counting them gave 3% (docs/speed.md, thirteenth round). This bench
wraps each component (a function or method, by ``module:qualified.name``) in a CPU timer
(`time.process_time`, inclusive: a component's callees count in it) for the timed loop only, and
prints its share of the loop, its calls and its CPU per call. The timers cost a few microseconds
per call: SQL-v0's first-process loop ran about 10% slower with the default list (1.37 CPU-s
against 1.23-1.26 untimed, two pairs), and the shares are of the timed loop.

Each run is its own process on a fresh ``CM_GYM_CACHE`` (the first process on a machine: it builds
the default store before the loop, outside the timing); ``--process second`` runs the first
process untimed, then times a second one with another seed on the same cache (what it left in
the work memo). Several runs print each share's range.

It also prints the share of the loop that Python's cyclic garbage collector takes (``gc.callbacks``
with the same CPU clock; collections run inside whatever component allocates, so this share is
inside the others), its collections and how many were full; ``--freeze`` calls ``gc.freeze()``
right after the timed process's ``gym.make``, what a training script may do (the package does not:
it changes the collector for the whole interpreter; docs/speed.md, fourteenth round).

    python bench/bench_env_components.py [--id cm_gym/SQL-v0] [--decisions 2000] [--runs 3]
        [--process first|second] [--freeze] [--component NAME=module:qualified.name ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

#: (what, where): the components docs/speed.md's thirteenth round reports, for any env id
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("the revision's candidates", "cm_gym.llm.revision:CandidateCache.get"),
    ("the check (world model)", "cm_gym.agent:BaseAgent.evaluate"),
    ("the drafts", "cm_gym.agent:BaseAgent.draft"),
    ("retrieval", "cm_gym.memory.retrieval:Retriever.retrieve"),
    ("  conditions on new tasks", "cm_gym.memory.index:_evaluate"),
    ("the terminal observation", "cm_gym.envs._observation:ObservationMixin._terminal_observation"),
    ("embedding new texts", "cm_gym.memory.embedding:Embedder.embed"),
    ("the simulator's seeded generators", "cm_gym.llm.simulated:stable_rng"),
    ("assembling observations", "cm_gym.envs.features:build_observation"),
    ("rendering prompts", "cm_gym.llm.simulated:render"),
    ("writing vectors to the work memo", "cm_gym.memory.embedding:Embedder._store"),
)

_CHILD = r"""
import functools, gc, importlib, inspect, json, sys, time
import gymnasium as gym, numpy as np
import cm_gym  # noqa: F401  (registers the ids)
env_id, decisions, seed, where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
freeze = sys.argv[5] == "1"
cpu, calls, on = {}, {}, [False]
collector, collecting = [0.0, 0, 0], [0.0]  # CPU, collections, full collections; a collection's start

def on_collection(phase, info):
    if not on[0]:
        return
    if phase == "start":
        collecting[0] = time.process_time()
    else:
        collector[0] += time.process_time() - collecting[0]
        collector[1] += 1
        collector[2] += info["generation"] == 2

gc.callbacks.append(on_collection)

def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not on[0]:
            return fn(*args, **kwargs)
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - start
            calls[name] = calls.get(name, 0) + 1
    return wrapper

for name, target in where:
    module, _, qual = target.partition(":")
    owner = importlib.import_module(module)
    *path, attr = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    raw = inspect.getattr_static(owner, attr)
    if isinstance(raw, staticmethod):
        setattr(owner, attr, staticmethod(timed(name, raw.__func__)))
    elif isinstance(raw, classmethod):
        setattr(owner, attr, classmethod(timed(name, raw.__func__)))
    else:
        setattr(owner, attr, timed(name, raw))
env = gym.make(env_id)
if freeze:
    gc.freeze()  # what the make left, out of every later collection (a training script's choice)
rng = np.random.default_rng(seed)
obs, info = env.reset(seed=seed)
on[0] = True
start = time.process_time()
for _ in range(decisions):
    obs, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    if term or trunc:
        obs, info = env.reset()
print(json.dumps({"loop": time.process_time() - start, "cpu": cpu, "calls": calls, "gc": collector,
                  "frozen": gc.get_freeze_count()}))
"""


def one_run(
    env_id: str, decisions: int, seed: int, where: list[tuple[str, str]], process: str, freeze: bool = False
) -> dict:
    """One fresh cache; the first process timed, or an untimed first one and a timed second (with
    `freeze`, ``gc.freeze()`` right after the timed process's ``gym.make``)."""
    with tempfile.TemporaryDirectory(prefix="cm_gym_components_") as cache:
        env = {**os.environ, "CM_GYM_CACHE": cache, "CM_GYM_PROGRESS": "0"}
        seeds = [seed + 10_000, seed] if process == "second" else [seed]
        out = None
        for i, s in enumerate(seeds):
            last = i == len(seeds) - 1
            timed = where if last else []
            res = subprocess.run(
                [sys.executable, "-c", _CHILD, env_id, str(decisions), str(s), json.dumps(timed),
                 "1" if freeze and last else "0"],
                check=True, capture_output=True, text=True, env=env,
            )  # fmt: skip
            out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out is not None
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--id", default="cm_gym/SQL-v0", help="the env id")
    ap.add_argument("--decisions", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3, help="processes timed, each on a fresh cache")
    ap.add_argument("--process", choices=("first", "second"), default="first")
    ap.add_argument("--freeze", action="store_true",
                    help="gc.freeze() after the timed process's gym.make (what a training script may do)")  # fmt: skip
    ap.add_argument("--component", action="append", default=[], metavar="NAME=module:qual.name",
                    help="time this instead of the default list (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    where = [tuple(c.split("=", 1)) for c in args.component] or list(COMPONENTS)
    if any(len(w) != 2 or ":" not in w[1] for w in where):
        ap.error("--component takes NAME=module:qualified.name")
    runs = [
        one_run(args.id, args.decisions, args.seed + r, where, args.process, args.freeze)  # type: ignore[arg-type]
        for r in range(args.runs)
    ]
    loops = [r["loop"] for r in runs]
    print(f"{args.id}, {args.process} process, {args.decisions} decisions, {args.runs} run(s): "
          f"the timed loop {min(loops):.2f}-{max(loops):.2f} CPU-s")  # fmt: skip
    print(f"  {'component':<36}{'share of the loop':>20}{'calls':>8}{'CPU per call':>16}")
    for name, _ in where:
        shares = [100 * r["cpu"].get(name, 0.0) / r["loop"] for r in runs]
        calls = [r["calls"].get(name, 0) for r in runs]
        per = [r["cpu"].get(name, 0.0) / max(1, c) * 1e6 for r, c in zip(runs, calls, strict=True)]
        print(f"  {name:<36}{min(shares):>12.1f}-{max(shares):.1f}%{round(sum(calls) / len(calls)):>8}"
              f"{min(per):>9.0f}-{max(per):.0f} us")  # fmt: skip
    shares = [100 * r["gc"][0] / r["loop"] for r in runs]
    full = [r["gc"][2] for r in runs]
    print(f"  {'the cyclic garbage collector':<36}{min(shares):>12.1f}-{max(shares):.1f}%"
          f"{round(sum(r['gc'][1] for r in runs) / len(runs)):>8}   collections, {min(full)}-{max(full)} full"
          f"{' (gc.freeze() after gym.make)' if args.freeze else ''}; inside the components above")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
