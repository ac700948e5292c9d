"""`cm-gym experiment NAME`: run one of the paper's studies (or ``all``) and write its report."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cm_gym.cli._args import add_llm_limit_options, llm_spec
from cm_gym.core import boundedjson
from cm_gym.core.quick import quick_mode, say
from cm_gym.studies.experiments import EXTRA_STUDIES, STUDIES, ExperimentConfig, run_experiments
from cm_gym.studies.experiments.runner import BACKENDS

logger = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "experiment",
        help="run a study of the paper (table1, accumulation, …, or all) and write its report",
        description=(
            "Run one of the paper's studies and write report.md / report.json / plots under "
            "RESULTS/reports/NAME. Units of work are cached under RESULTS/units: a rerun recomputes "
            "only what changed."
        ),
    )
    p.add_argument(
        "name",
        nargs="+",
        choices=("all", *STUDIES, *EXTRA_STUDIES),
        metavar="NAME",
        help=f"all or {', '.join(STUDIES)}; beyond the paper (not in all): {', '.join(EXTRA_STUDIES)}",
    )
    p.add_argument(
        "--benchmarks", nargs="+", help="registered benchmarks (default: SQL SAT Code; quick: SQL)"
    )
    p.add_argument(
        "--agents", nargs="+", choices=("react", "reflexion"), help="base agents (default both; quick: react)"
    )
    p.add_argument("--seeds", nargs="+", type=int, help="selector seeds (default 0 1 2 3 4; quick: 0)")
    p.add_argument(
        "--llm",
        type=llm_spec,
        help="simulated (default), openai[:model] (an OpenAI-compatible endpoint, cached) or "
        "recorded:<system> (real published drafts)",
    )
    p.add_argument("--llm-seed", type=int, help="seed of the LLM (default 0)")
    p.add_argument(
        "--split-seed",
        type=int,
        help="seed of the build / train / eval split (default 12345); one run per seed rotates it",
    )
    p.add_argument(
        "--llm-cache", type=Path, help="LLM response cache file (default for openai: the user cache)"
    )
    p.add_argument(
        "--llm-cache-mode",
        choices=("rw", "ro", "off"),
        help="rw (default), ro (replay only: a miss is an error), off",
    )
    p.add_argument(
        "--quick", action="store_true", help="smoke sizes: every study in minutes (also: CM_GYM_QUICK=1)"
    )
    p.add_argument(
        "--results",
        type=Path,
        help="results directory (default runs/experiments, quick: runs/experiments-quick)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="local worker processes for independent units (default 1); with --backend ray the CPUs of the local Ray instance (default: all)",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local (this machine: --workers processes) or ray (Ray tasks: a local instance of "
        "--workers CPUs, or the cluster at --address; pip install 'cm-gym[ray]')",
    )
    p.add_argument(
        "--address",
        help="join an existing Ray cluster (auto, HOST:6379 or ray://HOST:10001) instead of starting one",
    )
    p.add_argument(
        "--evaluator-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a keyword argument of every unit's evaluator (Domain.make_evaluator; VALUE read as JSON, "
        "else a string), e.g. rlimit=2000000 for Dafny; repeatable; it keys the units and is in the report",
    )
    p.add_argument(
        "--unsafe-evaluator-options",
        action="store_true",
        help="allow --evaluator-option values that weaken a guard (isolation off, a budget above its "
        "default, ...); they are recorded in every report",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_llm_limit_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.studies.experiments.runner import ExperimentError

    if args.workers < 1:
        raise ExperimentError("--workers must be at least 1")
    if args.address and args.backend != "ray":
        raise ExperimentError("--address joins a Ray cluster: add --backend ray")
    if args.seeds is not None and any(s < 0 for s in args.seeds):
        raise ExperimentError("--seeds must be non-negative integers")
    if args.split_seed is not None and args.split_seed < 0:
        raise ExperimentError("--split-seed must be a non-negative integer")
    if not args.quick and quick_mode():  # CM_GYM_QUICK=1 means --quick (`cm_gym.core.quick`)
        say("cm-gym experiment (as --quick)")
        args.quick = True
    evaluator_options, weakening = parse_evaluator_options(
        args.evaluator_option, args.benchmarks or (), allow_unsafe=args.unsafe_evaluator_options
    )
    cfg = ExperimentConfig.make(
        quick=args.quick,
        benchmarks=tuple(args.benchmarks) if args.benchmarks else None,
        agents=tuple(args.agents) if args.agents else None,
        seeds=tuple(dict.fromkeys(args.seeds)) if args.seeds else None,
        llm=args.llm,
        llm_seed=args.llm_seed,
        split_seed=args.split_seed,
        llm_cache=args.llm_cache,
        llm_cache_mode=args.llm_cache_mode,
        llm_timeout=args.llm_timeout,
        llm_max_tokens=args.llm_max_tokens,
        llm_retries=args.llm_retries,
        llm_concurrency=args.concurrency,
        results_dir=args.results or Path("runs/experiments-quick" if args.quick else "runs/experiments"),
        workers=args.workers,
        backend=args.backend,
        address=args.address,
        progress=not args.no_progress,
        evaluator_options=evaluator_options or None,
        unsafe_evaluator_options=weakening or None,
    )
    started = time.perf_counter()
    reports = run_experiments(args.name, cfg)
    for name, (report, md) in reports.items():
        verdicts = ", ".join(f"{d.verdict}" for d in report.directions)
        print(f"{name}: {md}" + (f"  [{verdicts}]" if verdicts else ""))
    print(f"total {time.perf_counter() - started:.1f} s; results in {cfg.results_dir}")
    return 0


def parse_evaluator_options(
    items: list[str], benchmarks: Sequence[str], *, allow_unsafe: bool = False
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``KEY=VALUE`` items as evaluator keyword arguments (VALUE read as bounded JSON, else a
    string), checked against each named benchmark's evaluator by type and range
    (`cm_gym.domains.evaluator_options`) and by making it with them: one clear error, not a failure
    in the first unit. Options that weaken a guard are refused unless `allow_unsafe`; the lines
    naming them are returned, to be recorded in the results."""
    from cm_gym.core.types import CmGymError
    from cm_gym.domains.evaluator_options import check_options
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.studies.experiments.runner import ExperimentError

    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ExperimentError(f"--evaluator-option wants KEY=VALUE, got {item!r}")
        options[key.strip()] = boundedjson.loads_option(text, what=f"--evaluator-option {key.strip()}")
    if options and not benchmarks:
        raise ExperimentError(
            "--evaluator-option needs --benchmarks (each domain's evaluator takes its own options)"
        )
    weakening: dict[str, None] = {}
    for name in benchmarks if options else ():
        domain = get_domain(get_benchmark(name).domain_name)
        try:
            report = check_options(domain.make_evaluator(), options)
            domain.make_evaluator(**options)
        except TypeError as exc:
            raise ExperimentError(f"{name}: its evaluator does not take {sorted(options)} ({exc})") from exc
        except (CmGymError, ValueError) as exc:
            raise ExperimentError(f"{name}: --evaluator-option refused: {exc}") from exc
        weakening.update(dict.fromkeys(f"{name}: {line}" for line in report.weakening))
    if weakening and not allow_unsafe:
        raise ExperimentError(
            "--evaluator-option weakens a guard (" + "; ".join(weakening) + "): add "
            "--unsafe-evaluator-options to run anyway (it is recorded in the results)"
        )
    if weakening:
        logger.warning("unsafe evaluator options (recorded in the results): %s", "; ".join(weakening))
    return options, tuple(weakening)
