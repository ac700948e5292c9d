"""`cm-gym calibrate`: the simulated revision's rates next to the paper's (``--fit`` fits them;
``--llm-cache FILE`` fits them to a cached run of a real model) and a rates file to load with
``--revision-rates``."""

from __future__ import annotations

import argparse

from cm_gym.cli._args import add_dataclass_args, dataclass_from_args
from cm_gym.cli.run import with_bars


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cm_gym.studies.analysis.calibrate_run import CalibrateConfig

    p = sub.add_parser(
        "calibrate",
        help="compare the simulator's revision rates with the paper's; fit them (--fit) or fit them "
        "to a real model's response cache (--llm-cache FILE)",
    )
    add_dataclass_args(p, CalibrateConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.studies.analysis.calibrate_run import CalibrateConfig, calibration_table, run_calibration

    cfg = dataclass_from_args(CalibrateConfig, args)
    result = with_bars(run_calibration, cfg)
    print(calibration_table(result))
    print(f"\nresults: {cfg.output_dir() / 'calibrate.json'}; {result.get('seconds', 0.0):.0f} s")
    return 0
