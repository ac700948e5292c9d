"""`cm-gym diagnose --benchmark NAME`: how much there is for a selector to learn (table + plot)."""

from __future__ import annotations

import argparse

from cm_gym.cli._args import add_dataclass_args, dataclass_from_args
from cm_gym.cli.run import with_bars

DESCRIPTION = (
    "How much there is for a selector to learn on a benchmark: scores of skip, top-1, random, the "
    "oracle, a supervised bound and the masked DQN on the held-out tasks; per decision, whether skip "
    "is the unique best option; per slot, no-op / harmful / helpful uses; each feature's AUC. The "
    "'place' column puts a policy between random and the oracle: place = (score - random) / "
    "(oracle - random), so 0 is no better than a random valid choice, 1 is as good as the oracle "
    "(which peeks), a negative place is below random and 0.5 is half the head-room; '-' when "
    "oracle and random tie (nothing to learn). Writes diagnose.json and diagnose.png."
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cm_gym.studies.analysis.diagnose import DiagnoseConfig

    p = sub.add_parser(
        "diagnose",
        help="measure the head-room of a benchmark: oracle-random gap, no-op/harmful uses, feature AUCs",
        description=DESCRIPTION,
    )
    add_dataclass_args(p, DiagnoseConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.studies.analysis.diagnose import DiagnoseConfig, diagnose_table, run_diagnose
    from cm_gym.studies.analysis.plots import write_diagnose_plot

    cfg = dataclass_from_args(DiagnoseConfig, args)
    result = with_bars(run_diagnose, cfg)
    plot = write_diagnose_plot(result, cfg.output_dir())
    print(diagnose_table(result))
    print(f"\nresults: {cfg.output_dir() / 'diagnose.json'}; plot: {plot}; {result['seconds']:.0f} s")
    return 0
