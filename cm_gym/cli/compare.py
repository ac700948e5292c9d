"""`cm-gym compare`: every registered memory-use policy on one frozen store and split (issue 34).

The baselines (None, Top-1, Random valid), the field's learned selectors (MemRL, MemQ, LinUCB,
Thompson sampling, Memento's classifier; each trained on T_train with the store frozen), the
masked DQN and the oracle, evaluated on the same held-out tasks over seeds; one table with
two-level paired CIs against Random and Top-1, the verdicts, ``results.json`` and ``comparison.png``
(`cm_gym.protocol.compare`). Your own policies are not built in: `cm-gym evaluate --policy`.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from cm_gym.cli._args import add_dataclass_args, add_output_options, dataclass_from_args
from cm_gym.cli.run import llm_line, with_bars
from cm_gym.core.quick import protocol_overrides, say
from cm_gym.protocol import ProtocolConfig
from cm_gym.protocol.compare import COMPARE_POLICIES, run_comparison, verdict_lines
from cm_gym.protocol.outputs import claim_out_dir
from cm_gym.protocol.report import results_table

DESCRIPTION = (
    "Every registered memory-use policy on one frozen store (the benchmark's default snapshot "
    "unless --store) and one split: None, Top-1, Random valid, MemRL, MemQ, LinUCB, Thompson "
    "sampling, Memento's classifier, the masked DQN (CF Memory) and the oracle. The learned ones "
    "train on T_train for --total-decisions decisions per seed. Prints the table with two-level "
    "paired CIs against Random and Top-1 and which policy wins; writes results.json and comparison.png."
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="every registered policy on one frozen store: table, CIs, figure",
        description=DESCRIPTION,
    )
    add_dataclass_args(p, ProtocolConfig, skip=("split_seeds", "n_build", "retention"))
    add_output_options(p)
    p.set_defaults(func=run)


def config_from(args: argparse.Namespace) -> ProtocolConfig:
    """The options given; else `COMPARE_POLICIES`, the paper layout only, runs/compare-<benchmark>
    and (under ``CM_GYM_QUICK=1``) the smoke sizes."""
    cfg = dataclass_from_args(ProtocolConfig, args)
    given = {k for k, v in vars(args).items() if v is not None}
    quick = protocol_overrides(given)
    if quick:
        say("cm-gym compare")
        cfg = replace(cfg, **quick)
    if "policies" not in given:
        cfg.policies = COMPARE_POLICIES
    if "obs_layouts" not in given:
        cfg.obs_layouts = ("paper",)
    if "out_dir" not in given:
        cfg.out_dir = Path("runs") / f"compare-{cfg.benchmark}"
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    claim_out_dir(cfg.out_dir, "compare", overwrite=args.overwrite)
    started = time.perf_counter()
    results = with_bars(run_comparison, cfg)
    print(results_table(results, args.format))
    info = sys.stdout if args.format == "text" else sys.stderr
    print("\n".join(verdict_lines(results)), file=info)
    print(llm_line(results.get("llm") or {}), file=info)
    print(
        f"\nresults: {Path(cfg.out_dir) / 'results.json'}; plot: {', '.join(results['plots'])}; "
        f"total time {time.perf_counter() - started:.1f} s",
        file=info,
    )
    return 0
