"""`cm-gym env`: list a benchmark's environment change families, or apply one to copies.

cm-gym env families [--benchmark NAME]
cm-gym env change --benchmark NAME --family FAMILY --out FOLDER [--seed N] [--data DIR]

``change`` writes copies of every changed file into FOLDER plus ``FOLDER/environment.json`` (the
change, the changed tasks, their content versions): the ``--env`` of ``cm-gym memory reverify``.
The benchmark's own data (shared data folders, generated caches) is only read.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="list or apply environment change families (schemas, tools, tests, specs)")
    esub = p.add_subparsers(dest="env_command", metavar="ACTION")
    esub.required = True
    q = esub.add_parser("families", help="the change families of every (or one) benchmark's domain")
    q.add_argument("--benchmark", help="a registered benchmark (default: every one)")
    q.set_defaults(func=run_families)
    q = esub.add_parser("change", help="apply one change family to copies of a benchmark's environments")
    q.add_argument("--benchmark", required=True, help="a registered benchmark (SQL, SAT, SMT, Code, ...)")
    q.add_argument("--family", required=True, help="a change family (see `cm-gym env families`)")
    q.add_argument("--out", type=Path, required=True, help="a new folder for the changed environment")
    q.add_argument("--seed", type=int, default=0, help="seed of the change's choices (default 0)")
    q.add_argument(
        "--data", type=Path, default=None, help="the benchmark's data folder (real-data benchmarks)"
    )
    q.set_defaults(func=run_change)


def run_families(args: argparse.Namespace) -> int:
    from cm_gym.domains.registry import get_benchmark, get_domain, list_benchmarks

    specs = [get_benchmark(args.benchmark)] if args.benchmark else list_benchmarks()
    for spec in specs:
        families = get_domain(spec.domain_name).change_families()
        print(
            f"{spec.name} ({spec.domain_name}): "
            + (", ".join(families) if families else "no change families")
        )
        for fam in families.values():
            print(f"  {fam.name:22} [{fam.kind}] {fam.description}")
    return 0


def check_out_folder(out: Path) -> None:
    """Refuse an ``--out`` that is (or lies under) something other than a folder, before any
    work: one `EnvironmentChangeError` line instead of a NotADirectoryError traceback."""
    from cm_gym.domains.environment import EnvironmentChangeError

    for path in (out, *out.parents):
        if path.is_symlink() and not path.exists():
            raise EnvironmentChangeError(f"--out {out}: {path} is a dangling symbolic link")
        if path.exists():
            if not path.is_dir():
                what = "is" if path == out else f"lies under {path}, which is"
                raise EnvironmentChangeError(f"--out {out} {what} not a folder: give a new folder")
            return


def run_change(args: argparse.Namespace) -> int:
    from cm_gym.domains.environment import environment_versions, save_environment
    from cm_gym.domains.registry import get_benchmark, get_domain

    check_out_folder(args.out)
    spec = get_benchmark(args.benchmark)
    domain = get_domain(spec.domain_name)
    tasks = spec.load(args.data)
    changed, change = domain.apply_change(args.family, tasks, args.out, seed=args.seed)
    path = save_environment(args.out, changed, change, benchmark=spec.name, domain=domain, seed=args.seed)
    before, after = environment_versions(domain, tasks), environment_versions(domain, changed)
    moved = sorted(env for env in after if after[env] != before.get(env))
    print(f"{spec.name} / {args.family}: {change.description}")
    print(
        f"{len(changed)} tasks; {len(change.rewritten_tasks)} references rewritten; "
        f"{len(moved)} of {len(after)} environments have a new content version"
    )
    print(f"wrote {path}")
    return 0
