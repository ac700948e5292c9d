"""`cm-gym build`: construct verified memory for a benchmark (Algorithm 1, lines 3–14).

Resumable: rerunning with the same ``--out`` skips the source tasks already processed. Prints the
build summary; ``--freeze`` also writes a hash-verified read-only snapshot.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

from cm_gym.cli._args import (
    add_llm_limit_options,
    llm_limit_kwargs,
    llm_spec,
    nonneg_int,
    pos_int,
    split_name,
)


def _counts(text: str) -> tuple[int, ...]:
    """``"0,25,50"`` → (0, 25, 50)."""
    try:
        counts = tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated task counts, got {text!r}") from None
    if any(c < 0 for c in counts):
        raise argparse.ArgumentTypeError("task counts must be >= 0")
    return counts


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a verified counterfactual memory store for a benchmark")
    p.add_argument("--benchmark", required=True, help="registered benchmark name, e.g. SQL")
    p.add_argument(
        "--data", type=Path, default=None, help="data folder in the benchmark's layout (default: its own)"
    )
    p.add_argument("--out", required=True, type=Path, help="store file (created, or resumed if it exists)")
    p.add_argument(
        "--split", choices=("build", "all"), default="build", help="tasks to build on (default build)"
    )
    p.add_argument("--split-seed", type=nonneg_int, default=12345, help="seed of the build/train/eval split")
    p.add_argument(
        "--split-by",
        default=None,
        type=split_name,
        metavar="NAME",
        help="which split's build side: tasks (paper App. D.2) | databases (environments apart) | "
        "shuffled (default: the benchmark's own)",
    )
    p.add_argument("--limit", type=pos_int, default=None, help="only the first N tasks of the split")
    p.add_argument(
        "--admit-a-minus",
        choices=("auto", "real", "any"),
        default="auto",
        help="which failed actions a⁻ may be stored: auto (only real model text when the drafts are real, "
        "e.g. recorded:<system>; default) | real (always only real) | any (simulated revisions too)",
    )
    p.add_argument(
        "--llm",
        default="simulated",
        type=llm_spec,
        help="LLM spec: simulated | openai[:model] | recorded:<system> (only tasks it has a recording for)",
    )
    p.add_argument(
        "--llm-cache",
        default=None,
        help="response cache file (default: $CM_GYM_CACHE/llm/responses.sqlite for a real LLM; "
        "the simulator is cached only when this is given)",
    )
    p.add_argument(
        "--llm-cache-mode",
        choices=("rw", "ro", "off"),
        default="rw",
        help="rw: replay and record; ro: replay only (a miss is an error, never a call); off: no cache",
    )
    p.add_argument(
        "--concurrency",
        "--llm-concurrency",
        type=pos_int,
        default=None,
        help="LLM calls in flight at most (real LLMs; default $CM_GYM_LLM_CONCURRENCY, else 8)",
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="LLM seed")
    p.add_argument(
        "--agent", choices=("react", "reflexion"), default="react", help="base agent loop (default react)"
    )
    p.add_argument("--max-decisions", type=pos_int, default=3, help="decision budget per task (default 3)")
    p.add_argument(
        "--retention",
        choices=("utility", "recent", "random", "similarity"),
        default="utility",
        help="retention policy at capacity (default utility)",
    )
    p.add_argument("--capacity", type=pos_int, default=200, help="B, the record capacity")
    p.add_argument(
        "-K", "--alternatives", type=nonneg_int, default=4, help="K alternatives per failed decision"
    )
    p.add_argument(
        "--reuse-policy",
        choices=("top1", "never"),
        default="top1",
        help="construction-time reuse: revise drafts with the top record, or never (default top1)",
    )
    p.add_argument("--verification-budget", type=int, default=None, help="evaluator calls for alternatives")
    p.add_argument(
        "--checkpoints",
        type=_counts,
        default=(),
        help="comma-separated task counts to snapshot, e.g. 0,25,50",
    )
    p.add_argument(
        "--checkpoint-dir", type=Path, default=None, help="where --checkpoints go (default <out>-checkpoints)"
    )
    p.add_argument(
        "--workers",
        type=pos_int,
        default=1,
        help="speculation processes running tasks ahead of the one writer; the store is "
        "byte-identical to a serial build's (default 1: serial)",
    )
    p.add_argument("--freeze", type=Path, default=None, help="also freeze the store into this snapshot")
    p.add_argument("--json", type=Path, default=None, help="write the summary as JSON here")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_llm_limit_options(p, concurrency=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cm_gym.core.splits import make_split
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.llm.factory import make_llm
    from cm_gym.llm.limits import limit
    from cm_gym.memory.construction import ConstructionConfig, build_memory
    from cm_gym.memory.store import RecordStore

    spec = get_benchmark(args.benchmark)
    domain = get_domain(spec.domain_name)
    tasks = spec.load(args.data)
    by_id = {t.task_id: t for t in tasks}
    if args.split == "build":
        kind = spec.split_kind(args.split_by)
        ids = list(make_split(tasks, seed=args.split_seed, kind=kind).build)
    else:
        print("warning: building on all tasks: do not evaluate on this store's benchmark", file=sys.stderr)
        ids = [t.task_id for t in tasks]
    if args.llm.startswith("recorded:"):  # tasks without a published output are left out, not simulated
        from cm_gym.llm.recorded import recorded_task_ids

        covered = set(recorded_task_ids(args.llm, [by_id[i] for i in ids])[0])
        if len(covered) < len(ids):
            print(
                f"{args.llm}: left out {len(ids) - len(covered)} task(s) without a published output",
                file=sys.stderr,
            )
        ids = [i for i in ids if i in covered]
    if args.limit is not None:
        ids = ids[: args.limit]
    if not ids:  # issue 33: one clear error, not an empty store and rc 0
        from cm_gym.protocol.config import ProtocolError

        why = (
            f"{args.llm} has a published output for none of them"
            if args.llm.startswith("recorded:") and by_id
            else f"the {args.split} split of {len(tasks)} task(s) is empty"
        )
        raise ProtocolError(f"no {spec.name} tasks to build on: {why}; nothing written")
    chosen = [by_id[i] for i in ids]
    cfg = ConstructionConfig(
        K=args.alternatives,
        capacity=args.capacity,
        retention=args.retention,
        reuse_policy=args.reuse_policy,
        verification_budget=args.verification_budget,
        seed=args.seed,
        admit_a_minus=args.admit_a_minus,
    )
    # a recipe, not an instance: speculation workers (--workers) build the same LLM from it
    llm_recipe = functools.partial(
        make_llm,
        args.llm,
        seed=args.seed,
        cache_path=args.llm_cache,
        cache_mode=args.llm_cache_mode,
        task_lookup=by_id.get,
        **llm_limit_kwargs(args),
    )
    # what shaped the records (--workers did not: a parallel build is the serial build's file;
    # nor do the client timeout and retries, and unset limits are left out)
    skip = ("func", "workers", "llm_timeout", "llm_retries")
    settings = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(args).items()
        if k not in skip and not (k == "llm_max_tokens" and v is None)
    }
    settings["concurrency"] = limit("concurrency", args.concurrency)
    with RecordStore(args.out, domain=domain.name, benchmark=spec.name, capacity=args.capacity) as store:
        already = len(store.processed_task_ids & set(ids))
        print(f"building {spec.name} memory into {args.out}: {len(ids)} tasks ({already} already processed)")
        store.set_meta("build_settings", json.dumps(settings, sort_keys=True))
        bar = None
        if not args.no_progress:
            from cm_gym.core.progress import progress_bar

            bar = progress_bar(len(ids), "build", "task", file=sys.stderr)

        def progress(done: int, total: int) -> None:
            if bar is not None:
                bar.n = done
                bar.set_postfix(records=len(store), refresh=False)
                bar.refresh()

        common: dict[str, Any] = {
            "agent_kind": args.agent,
            "max_decisions": args.max_decisions,
            "progress": progress,
            "checkpoints": args.checkpoints,
            "checkpoint_dir": args.checkpoint_dir or (args.out.parent / f"{args.out.stem}-checkpoints"),
        }
        if args.workers > 1:
            from cm_gym.memory.parallel import build_memory_parallel

            summary = build_memory_parallel(
                domain, chosen, store, llm_recipe, None, cfg, workers=args.workers, **common
            )
        else:
            summary = build_memory(
                domain, chosen, store, llm_recipe(), domain.make_evaluator(), cfg, **common
            )
        if bar is not None:
            bar.close()
        print(summary.format())
        print(
            f"store {args.out}: {len(store)} records, {len(store.processed_task_ids)} source tasks processed"
        )
        from cm_gym.memory.defaults import warn_if_nearly_empty

        warn_if_nearly_empty(f"store {args.out}", len(store), len(store.processed_task_ids))
        if args.freeze is not None:
            frozen = store.freeze(args.freeze, overwrite=True)
            print(f"snapshot {args.freeze}: sha256 {frozen.manifest['sha256']} ({len(frozen)} records)")
    if args.json is not None:
        args.json.write_text(json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")
    return 0
