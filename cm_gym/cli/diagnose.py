"""`cm-gym diagnose --benchmark NAME`: how much there is for a selector to learn (table + plot)."""

from __future__ import annotations

import argparse

from cm_gym.cli._args import add_dataclass_args, dataclass_from_args
from cm_gym.cli.run import with_bars


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cm_gym.studies.analysis.diagnose import DiagnoseConfig

    p = sub.add_parser(
        "diagnose",
        help="measure the head-room of a benchmark: oracle-random gap, no-op/harmful uses, feature AUCs",
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
