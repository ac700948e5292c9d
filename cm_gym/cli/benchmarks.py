"""`cm-gym benchmarks`: list the registered benchmarks and their Gymnasium ids."""

from __future__ import annotations

import argparse

from cm_gym.domains.registry import list_benchmarks


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("benchmarks", help="list registered benchmarks")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for spec in list_benchmarks():
        print(f"{spec.env_id:32s} domain={spec.domain().name:8s} {spec.description}")
        if spec.data_layout:
            print(f"{'':32s} --data DIR: {spec.data_layout}")
    return 0
