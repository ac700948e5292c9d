"""`cm-gym run`: the main job — build → freeze → train (5 seeds) → evaluate, then one table and plots."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from cm_gym.cli._args import add_dataclass_args, add_output_options, dataclass_from_args
from cm_gym.core.progress import PhaseBar
from cm_gym.core.quick import protocol_overrides, say
from cm_gym.protocol import ProtocolConfig, run_protocol
from cm_gym.protocol.outputs import claim_out_dir
from cm_gym.protocol.report import results_table, write_plots

R = TypeVar("R")

DESCRIPTION = (
    "The paper's protocol end to end: build verified memory on T_build and freeze it, train one "
    "masked-DQN selector per seed on T_train (best checkpoint on a validation subset), evaluate "
    "None / Top-1 / Random valid / CF Memory / Oracle on the held-out T_eval, then print the results "
    "table and write results.json, plots and TensorBoard logs into --out-dir."
)


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `cm-gym run` (shared with nothing else)."""
    add_dataclass_args(p, ProtocolConfig)
    add_output_options(p)
    return p


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run the whole protocol and print the results table", description=DESCRIPTION
    )
    configure(p).set_defaults(func=run)


def config_from(args: argparse.Namespace) -> ProtocolConfig:
    """The `ProtocolConfig` of run / train / tabulate: the options given, the defaults for the
    rest (smoke sizes for those under ``CM_GYM_QUICK=1``, `cm_gym.core.quick`)."""
    cfg = dataclass_from_args(ProtocolConfig, args)
    quick = protocol_overrides(k for k, v in vars(args).items() if v is not None)
    if quick:
        say(f"cm-gym {getattr(args, 'command', None) or 'run'}")
        cfg = replace(cfg, **quick)
    if getattr(args, "out_dir", None) is None:
        cfg.out_dir = Path("runs") / cfg.benchmark
    return cfg


def with_bars(work: Callable[..., R], cfg: Any) -> R:
    """``work(cfg, progress=bar)`` under a `PhaseBar` (shown when ``cfg.progress``), closed after:
    how every long command (run, train, diagnose, calibrate) shows its phases."""
    bar = PhaseBar(cfg.progress)
    result = work(cfg, progress=bar)
    bar.close()
    return result


def llm_line(stats: dict) -> str:
    """One line on what the LLM cost: live calls and tokens vs replies replayed from the cache;
    where the LLM marks its replies (recorded:<system>), a line with how many were real."""
    from cm_gym.llm.replies import format_counts

    replies = format_counts(stats.get("replies")) if stats else ""
    if replies:
        replies = "\n" + replies
    if "mode" not in stats:
        what = "the recorded LLM: published outputs" if replies else "the simulated LLM"
        return f"\nLLM: not cached ({what}: nothing to pay)" + replies
    return replies + (
        f"\nLLM: {stats.get('live_calls', 0):,} live calls ({stats.get('live_tokens', 0):,} tokens); "
        f"{stats.get('hits', 0):,} replies replayed from the cache ({stats.get('tokens_saved', 0):,} tokens "
        f"not spent again); cache mode {stats.get('mode')}"
    )


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    claim_out_dir(cfg.out_dir, "run", overwrite=args.overwrite)
    started = time.perf_counter()
    results = with_bars(run_protocol, cfg)
    plots = write_plots(results, Path(cfg.out_dir))
    elapsed = time.perf_counter() - started
    results["timings"]["total_seconds"] = elapsed
    (Path(cfg.out_dir) / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print(results_table(results, args.format))
    # with --format json/markdown stdout is the table alone (pipe it); the rest goes to stderr
    info = sys.stdout if args.format == "text" else sys.stderr
    print(llm_line(results.get("llm") or {}), file=info)
    recorded = results.get("recorded")
    if recorded:
        left = ", ".join(f"{n} {side}" for side, n in recorded["excluded"].items() if n) or "none"
        print(
            f"recorded:{recorded['system']}: tasks left out for want of a published output: {left}", file=info
        )
    print(
        f"\nresults: {Path(cfg.out_dir) / 'results.json'}; plots: {', '.join(str(p) for p in plots)}",
        file=info,
    )
    print(f"total time {elapsed:.1f} s", file=info)
    return 0
