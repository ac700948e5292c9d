"""Issue 11 figures: tabulation throughput, live vs replayed calls of a whole run, ro-mode env speed.

    python bench/bench_tabulate.py [--benchmark SQL] [--latency-ms 50] [--eval-tasks 60]

Everything goes through the real `openai` client over real HTTP to the project's own server,
`cm-gym serve-llm` (the simulated LLM) in a separate process, started with ``--latency-ms`` (default
50): a real model answers in tens to thousands of milliseconds, so without an artificial latency
concurrency would have nothing to overlap. The latency is an asyncio sleep in the server, like the
wait on a remote GPU; it holds no worker. The server keeps its own response cache, warmed by one
pass before the throughput runs: the simulator's CPU time per draft (it parses SQL) would otherwise
be a server cost a GPU-backed model does not have, and every run sees the same server.

1. Tabulation throughput: `cm-gym tabulate`'s env enumeration (a prebuilt snapshot, so only env
   calls) on a fresh cache at concurrency 1, 8 and 32: calls/s and the ratio to concurrency 1.
2. A whole `cm-gym run` at small sizes: LLM calls and tokens made live on an empty cache, then
   after `cm-gym tabulate` on another empty cache, replayed with ``--llm-cache-mode ro`` (target 0).
3. Env decisions/s on the fully tabulated cache in "ro" mode (`--llm openai`) as a ratio to the
   simulated LLM in process, same tasks, store and random policy (target >= 0.5x).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.cli.tabulation import tabulate
from cm_gym.protocol import ProtocolConfig, build_snapshot, prepare, run_protocol


@contextlib.contextmanager
def serve(benchmark: str, latency_ms: float, cache: Path) -> Iterator[str]:
    """`cm-gym serve-llm` in a subprocess (with its own response cache); yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "cm_gym.cli", "serve-llm", "--port", "0", "--benchmark", benchmark,
         "--model-name", "sim", "--latency-ms", str(latency_ms), "--llm-cache", str(cache)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if " at " not in first:
            raise RuntimeError(f"server did not start: {first}{proc.stderr.read() if proc.stderr else ''}")
        yield first.split(" at ")[1].split(" for ")[0]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def quiet(fn: Any, *args: Any, **kw: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kw)


def throughput(base: ProtocolConfig, snapshot: Path, work: Path) -> None:
    print("\n1. tabulation throughput (env enumeration, fresh client cache each time)")
    quiet(
        tabulate,
        dataclasses.replace(base, store=snapshot, concurrency=32, llm_cache=work / "warm.sqlite"),
        "eval",
    )
    print(f"   (server cache warmed; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(
        f"   {'concurrency':>11}  {'calls':>6}  {'wall s':>7}  {'calls/s':>8}  {'ratio':>6}"
        f"  {'fetching s':>10}  {'calls/s fetching':>16}  {'ratio':>6}"
    )
    first: tuple[float, float] | None = None
    for concurrency in (1, 8, 32):
        cfg = dataclasses.replace(
            base, store=snapshot, concurrency=concurrency, llm_cache=work / f"throughput-{concurrency}.sqlite"
        )
        report = quiet(tabulate, cfg, "eval")
        rate, fetch_rate = report.env.calls / report.seconds, report.env.calls / report.env.seconds
        first = first or (rate, fetch_rate)
        print(
            f"   {concurrency:>11}  {report.env.calls:>6}  {report.seconds:>7.1f}  {rate:>8.1f}  {rate / first[0]:>5.1f}x"
            f"  {report.env.seconds:>10.1f}  {fetch_rate:>16.1f}  {fetch_rate / first[1]:>5.1f}x"
        )


def run_calls(base: ProtocolConfig, work: Path) -> Path:
    print("\n2. a whole `cm-gym run` (small sizes): LLM calls and tokens made live")
    live_cfg = dataclasses.replace(base, llm_cache=work / "live.sqlite", out_dir=work / "live")
    live = quiet(run_protocol, live_cfg)["llm"]
    print(
        f"   empty cache, rw:                  {live['live_calls']:>6,} calls  {live['live_tokens']:>10,} tokens"
    )
    tab_cfg = dataclasses.replace(base, llm_cache=work / "tab.sqlite", out_dir=work / "tab")
    report = quiet(tabulate, tab_cfg, "all")
    print(
        f"   cm-gym tabulate (--split all):    {report.calls:>6,} calls  {report.tokens:>10,} tokens"
        f"  ({report.states:,} states, {report.seconds:.1f} s)"
    )
    replay_cfg = dataclasses.replace(tab_cfg, llm_cache_mode="ro", out_dir=work / "replay")
    replay = quiet(run_protocol, replay_cfg)["llm"]
    print(
        f"   after tabulate, ro:               {replay['live_calls']:>6,} calls  {replay['live_tokens']:>10,} tokens"
        f"  ({replay['hits']:,} replayed, {replay['misses']} misses)"
    )
    return work / "tab" / "memory" / "snapshot.sqlite"


def decisions_per_second(base: ProtocolConfig, snapshot: Path, work: Path, decisions: int) -> None:
    from cm_gym.envs.selection import MemorySelectionEnv

    print("\n3. env decisions/s: ro replay of the tabulated cache vs the simulated LLM in process")
    prepared = prepare(base)
    ids = list(prepared.split.eval)
    rates = {}
    for label, llm_kw in (
        ("simulated", {"llm": "simulated"}),
        ("openai, ro cache", {"llm": "openai", "llm_cache": work / "tab.sqlite", "llm_cache_mode": "ro"}),
    ):
        env = MemorySelectionEnv(
            benchmark=base.benchmark, store=snapshot, tasks=ids, task_order="sequential",
            max_decisions=base.max_decisions, k=base.k, **llm_kw,
        )  # fmt: skip
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        done, start = 0, time.perf_counter()
        while done < decisions:
            mask = env.action_masks()
            _, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
            done += 1
            if terminated or truncated:
                env.reset()
        rates[label] = done / (time.perf_counter() - start)
        env.close()
        print(f"   {label:<18} {rates[label]:>8.1f} decisions/s")
    print(f"   ratio ro/simulated: {rates['openai, ro cache'] / rates['simulated']:.2f}x (target >= 0.5x)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--benchmark", default="SQL")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--eval-tasks", type=int, default=160, help="tasks enumerated in the throughput test")
    parser.add_argument("--decisions", type=int, default=600, help="decisions timed in test 3")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_tabulate_")))
        url = stack.enter_context(serve(args.benchmark, args.latency_ms, work / "server-cache.sqlite"))
        os.environ.update(OPENAI_BASE_URL=url, CM_GYM_MODEL="sim", OPENAI_API_KEY="EMPTY")
        print(
            f"server: cm-gym serve-llm --latency-ms {args.latency_ms:g} at {url} (simulated LLM, real HTTP)"
        )
        base = ProtocolConfig(
            benchmark=args.benchmark, llm="openai", seeds=(0,), total_decisions=200, checkpoint_every=100,
            n_build=40, n_train=30, n_eval=args.eval_tasks, tensorboard=False, progress=False, out_dir=work / "base",
        )  # fmt: skip
        snapshot = quiet(build_snapshot, base, prepare(base))  # memory once, for the throughput test
        throughput(base, snapshot, work)
        small = dataclasses.replace(base, n_eval=30)
        tabulated_snapshot = run_calls(small, work)
        decisions_per_second(small, tabulated_snapshot, work, args.decisions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
