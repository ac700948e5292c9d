"""`cm-gym` console command. Each sub-command lives in its own module of this package and exposes
``add_parser(subparsers)`` (which sets ``func`` on its parser) — adding one means adding a module
name to `COMMANDS`."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

COMMANDS = (
    "build",
    "memory",
    "env",
    "train",
    "evaluate",
    "run",
    "compare",
    "experiment",
    "tabulate",
    "serve_llm",
    "setup_local_model",
    "cache",
    "benchmarks",
    "check_domain",
    "data",
    "diagnose",
    "calibrate",
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cm-gym", description="Verified counterfactual memory gym.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v, -vv)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"cm_gym.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"cm_gym.cli.{name}":
                continue
            raise
        module.add_parser(sub)
    return parser


def guarded_run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a command: a `CmGymError` is one line on stderr and exit status 2, Ctrl-C is 130."""
    level = logging.WARNING - 10 * min(getattr(args, "verbose", 0), 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "verbose", 0):  # plugins load on import, before logging is set up
        from cm_gym.domains.catalog import FAILED_PLUGINS

        for name, tb in FAILED_PLUGINS:
            logging.getLogger("cm_gym.domains").info("traceback of plugin %s:\n%s", name, tb.rstrip())
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from cm_gym.core.types import CmGymError

        if isinstance(exc, CmGymError):
            print(f"cm-gym: error: {exc}", file=sys.stderr)
            return 2
        raise


def main(argv: Sequence[str] | None = None) -> int:
    from cm_gym.core.types import CmGymError
    from cm_gym.protocol import provenance

    provenance.COMMAND = ["cm-gym", *(sys.argv[1:] if argv is None else argv)]
    try:  # a parser may look up benchmarks (a strict-mode plugin error is one line here too)
        args = make_parser().parse_args(argv)
    except CmGymError as exc:
        print(f"cm-gym: error: {exc}", file=sys.stderr)
        return 2
    return guarded_run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
