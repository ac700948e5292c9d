"""`cm-gym evaluate`: evaluate policies on held-out tasks with store and selectors frozen.

Reads ``training.json`` (``--training``, default ``<out-dir>/training.json``) when there is one:
its configuration is the base (seeds, benchmark, sizes, snapshot), options given on the command
line override it. Your own policies join the table with ``--policy NAME=package.module:attribute``
(`cm_gym.protocol.evaluation`). Without a training record the store defaults to the benchmark's default
snapshot and CF Memory is left out.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from cm_gym.cli._args import add_dataclass_args, add_output_options, dataclass_from_args, dataclass_from_json
from cm_gym.cli.run import PhaseBar
from cm_gym.core.quick import protocol_overrides, say
from cm_gym.protocol import ProtocolConfig, ProtocolError, evaluate_all
from cm_gym.protocol.outputs import claim_out_dir
from cm_gym.protocol.report import results_table, write_plots

DESCRIPTION = (
    "Evaluate the policies on the held-out tasks T_eval with the store and the selectors frozen: "
    "the built-in ones (--policies) and your own (--policy). Seeds, sizes and the snapshot come "
    "from training.json unless given here; what only training reads (decisions, checkpoints, build "
    "sizes, the learner) comes from training.json alone. Prints the table; writes results.json and plots."
)


#: `ProtocolConfig` fields that only building or training read: evaluation takes them from
#: training.json. Still accepted (old command lines keep working) but not listed by --help.
TRAINING_ONLY = (
    "n_build",
    "n_train",
    "retention",
    "total_decisions",
    "checkpoint_every",
    "validation_fraction",
    "obs_layouts",
    "tensorboard",
    "algo",
    "env_runners",
    "ray_address",
)


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `cm-gym evaluate` and `python evaluate.py` (training-only ones hidden)."""
    add_dataclass_args(p, ProtocolConfig, skip=("split_seeds",))
    hidden = {"--" + name.replace("_", "-") for name in TRAINING_ONLY}
    for action in p._actions:
        if hidden & set(action.option_strings):
            action.help = argparse.SUPPRESS
    p.add_argument(
        "--training", type=Path, default=None, metavar="FILE", help="training.json written by `cm-gym train`"
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="[NAME=]MODULE:ATTR",
        help="your policy: an object with SB3's predict, or a factory make(env, seed) returning one "
        "(repeatable); mask-aware policies (predict(..., action_masks=...)) get the masks",
    )
    add_output_options(p)
    return p


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate", help="evaluate policies on T_eval (frozen store and selectors)", description=DESCRIPTION
    )
    configure(p).set_defaults(func=run)


def _training_record(args: argparse.Namespace) -> tuple[Path, dict | None]:
    out_dir = getattr(args, "out_dir", None)
    benchmark = getattr(args, "benchmark", None) or "SQL"
    path = args.training or Path(out_dir or Path("runs") / benchmark) / "training.json"
    if not path.is_file():
        if args.training is not None:
            raise ProtocolError(f"{path} not found: run `cm-gym train` first or fix --training")
        return path, None
    try:
        from cm_gym.core import boundedjson

        return path, boundedjson.load_file(path)
    except (OSError, ValueError) as exc:
        raise ProtocolError(f"{path} is not a readable training record: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from cm_gym.protocol.evaluation import load_policy

    path, record = _training_record(args)
    base = dataclass_from_json(ProtocolConfig, record["config"]) if record else None
    cfg = dataclass_from_args(ProtocolConfig, args, base=base)
    quick = {} if record else protocol_overrides(k for k, v in vars(args).items() if v is not None)
    if quick:  # CM_GYM_QUICK=1 without a training record: smoke sizes (`cm_gym.core.quick`)
        say("cm-gym evaluate")
        cfg = replace(cfg, **quick)
    if args.out_dir is None:
        cfg.out_dir = path.parent if record else Path("runs") / cfg.benchmark
    checkpoints: dict[str, dict[int, str]] = {}  # {layout: {seed: path}}
    if record:
        for t in record["training"]:
            checkpoints.setdefault(t.get("layout", "paper"), {})[int(t["seed"])] = t["best_checkpoint"]
        cfg.store = cfg.store or Path(record["snapshot"])
        trained = set.intersection(*(set(c) for c in checkpoints.values())) if checkpoints else set()
        missing = sorted(set(cfg.seeds) - trained)
        skipped = bool(record.get("training_skipped_reason"))  # a 0-record store: CF Memory skips
        if missing and "cf_memory" in cfg.policies and not skipped:
            raise ProtocolError(
                f"{path} has no selector for seed(s) {missing}; trained seeds: {sorted(trained)}"
            )
    elif "cf_memory" in cfg.policies:
        if args.policies is not None:
            raise ProtocolError(
                f"{path} not found: train first, or pass --training, or leave cf_memory out of --policies"
            )
        cfg.policies = tuple(p for p in cfg.policies if p != "cf_memory")
        print(f"note: no {path}; evaluating without CF Memory", file=sys.stderr)
    if cfg.store is None:
        from cm_gym.memory.defaults import default_snapshot

        cfg.store = default_snapshot(cfg.benchmark)
    for text in args.policy:
        name, source = load_policy(text)
        if name in cfg.policies or name in cfg.custom_policies:
            raise ProtocolError(
                f"--policy {text!r}: the name {name!r} is already taken; use NAME=MODULE:ATTR"
            )
        cfg.custom_policies[name] = source
        cfg.policies = (*cfg.policies, name)
    claim_out_dir(cfg.out_dir, "evaluate", overwrite=args.overwrite)
    bar = PhaseBar(cfg.progress)
    results = evaluate_all(cfg, checkpoints, progress=bar)
    bar.close()
    write_plots(results, Path(cfg.out_dir), training=(record or {}).get("training"))
    print(results_table(results, args.format))
    return 0
