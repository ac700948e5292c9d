"""`cm-gym cache`: what cm_gym keeps under ``$CM_GYM_CACHE`` (default ``~/.cache/cm_gym``).

The default stores that ``gymnasium.make`` builds on first use (``stores/``):

cm-gym cache list  [--benchmark NAME] [--json]     (state, records, size, age of each snapshot)
cm-gym cache clear [--benchmark NAME] [--dry-run]  (never removes one another process is using)

The work memo (``work/``: pure work every process would redo; `cm_gym.core.workmemo_files`):

cm-gym cache list  --work [--json]                 (size, last use, state of each file)
cm-gym cache clear --work [--unused-days N] [--dry-run]  (files no live process holds; with N,
                                                    only those unused for N days: an upgrade's
                                                    old versions)

The LLM response cache as a portable artefact:

cm-gym cache stats  [--llm-cache PATH] [--json]
cm-gym cache export OUT [--llm-cache PATH]          (JSON Lines; OUT ending in .gz is gzip'ed)
cm-gym cache import FILE [--llm-cache PATH] [--skip-conflicts] [--allow-unverified]

PATH defaults to the default response cache, ``$CM_GYM_CACHE/llm/responses.sqlite``. Export and
stats never write to the cache; import reads FILE as untrusted (a regular file only, size and
nesting caps), verifies the whole of it first, opens PATH only after a read-only look shows it is
a response cache (never a memory snapshot or another SQLite file), and adds everything in one
transaction, or nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="list or clear cached default stores; inspect, export or import the LLM response cache",
        description="Everything lives under $CM_GYM_CACHE (default ~/.cache/cm_gym).",
    )
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION")
    csub.required = True
    q = csub.add_parser("list", help="the default stores built by gymnasium.make / default_snapshot")
    q.add_argument("--benchmark", default=None, help="only this benchmark's stores")
    q.add_argument("--work", action="store_true", help="list the work memo's files instead")
    q.add_argument("--json", action="store_true", help="print the entries as JSON")
    q.set_defaults(func=run_list)
    q = csub.add_parser("clear", help="remove cached default stores (rebuilt on next use)")
    q.add_argument("--benchmark", default=None, help="only this benchmark's stores")
    q.add_argument("--work", action="store_true", help="remove the work memo's files instead")
    q.add_argument(
        "--unused-days",
        type=_days,
        default=None,
        metavar="N",
        help="with --work: only files no process has opened for N days (e.g. an upgrade's old versions)",
    )
    q.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    q.set_defaults(func=run_clear)

    def with_path(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--llm-cache",
            default=None,
            help="response cache file (default: $CM_GYM_CACHE/llm/responses.sqlite)",
        )

    q = csub.add_parser("stats", help="entries, size, tokens recorded, per template and model")
    with_path(q)
    q.add_argument("--json", action="store_true", help="print the summary as JSON")
    q.set_defaults(func=run_stats)
    q = csub.add_parser("export", help="write the cache as a portable, checksummed JSON Lines file")
    q.add_argument("out", type=Path, help="file to write (.jsonl, or .jsonl.gz for gzip)")
    with_path(q)
    q.set_defaults(func=run_export)
    q = csub.add_parser("import", help="verify an exported file and merge it into the cache")
    q.add_argument("file", type=Path, help="a file written by `cm-gym cache export`")
    with_path(q)
    q.add_argument(
        "--skip-conflicts",
        action="store_true",
        help="import what does not conflict; keep the cached reply where the file has another",
    )
    q.add_argument(
        "--allow-unverified",
        action="store_true",
        help="also import entries without a stored request (their key cannot be verified)",
    )
    q.set_defaults(func=run_import)


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not days >= 0 or days == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of days >= 0, got {text!r}")
    return days


def _cache(args: argparse.Namespace, mode: str):  # noqa: ANN202 - ResponseCache, imported lazily
    from cm_gym.llm.cache import ResponseCache, resolve_cache_path

    return ResponseCache(resolve_cache_path(args.llm_cache), mode)


def run_stats(args: argparse.Namespace) -> int:
    from cm_gym.llm.cache_io import cache_summary

    with _cache(args, "ro") as cache:
        summary = cache_summary(cache)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"cache         {summary['path']} ({summary['bytes'] / 1e6:.1f} MB)")
    print(f"entries       {summary['entries']:,} ({summary['without_request']:,} without a stored request)")
    print(f"tokens        {summary['tokens_recorded']:,} recorded (what replaying them all saves)")
    print("templates     " + (", ".join(f"{k} {v:,}" for k, v in summary["templates"].items()) or "-"))
    print("models        " + (", ".join(f"{k} {v:,}" for k, v in summary["models"].items()) or "-"))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from cm_gym.llm.cache_io import export_cache

    with _cache(args, "ro") as cache:
        count = export_cache(cache, args.out)
        print(f"exported {count:,} entries of {cache.path} to {args.out}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from cm_gym.llm.cache_io import merge_export, read_export

    export = read_export(args.file, allow_unverified=args.allow_unverified)  # before the cache is opened
    with _cache(args, "rw") as cache:
        report = merge_export(cache, export, skip_conflicts=args.skip_conflicts)
        print(
            f"imported {report.added:,} new entries into {cache.path} ({report.read:,} read, "
            f"{report.present:,} already cached, {report.unverified:,} unverified)"
        )
    if report.conflicts:
        print(
            f"kept the cached reply for {len(report.conflicts)} conflicting entries: "
            + ", ".join(report.conflicts[:5]),
            file=sys.stderr,
        )
    return 0


def run_list(args: argparse.Namespace) -> int:
    from cm_gym.core.paths import cache_root

    if args.work:
        return _list_work(args)
    from cm_gym.memory.default_cache import list_default_stores

    entries = list_default_stores(args.benchmark)
    return _show(
        args.json,
        entries,
        f"default stores in {cache_root() / 'stores'}",
        "none (gymnasium.make builds one on first use)",
        f"{'benchmark':14} {'key':12} {'records':>7} {'size':>8}  {'created':20} state",
        [
            f"{e.benchmark[:14]:14} {e.key[:12]:12} {'-' if e.records is None else e.records:>7} "
            f"{e.bytes / 1e6:7.2f}M  {e.created[:20]:20} {e.state}"
            for e in entries
        ],
    )


def _show(as_json: bool, entries: list, title: str, empty: str, header: str, lines: list[str]) -> int:
    """Print a listing: the entries as JSON, or a title, a header and one line per entry."""
    if as_json:
        print(json.dumps([e.to_dict() for e in entries], indent=2))
        return 0
    print(title)
    if not entries:
        print(f"  {empty}")
        return 0
    for line in (header, *lines):
        print(f"  {line}")
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from cm_gym.memory.default_cache import clear_default_stores

    if args.work:
        return _clear_work(args)
    if args.unused_days is not None:
        print("cm-gym: error: --unused-days applies to the work memo: add --work", file=sys.stderr)
        return 2

    removed, skipped = clear_default_stores(args.benchmark, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for path in removed:
        print(f"{verb} {path}")
    for path in skipped:
        print(f"skipped {path}: in use by another process", file=sys.stderr)
    print(f"{verb} {len(removed)} default store(s); {len(skipped)} in use")
    return 0


def _list_work(args: argparse.Namespace) -> int:
    from cm_gym.core.workmemo_files import work_files, work_folder

    files = work_files()
    lines = [f"{f.bytes / 1e6:8.2f}M {f.idle_days():7.1f} d  {f.state:15} {f.name}" for f in files]
    lines.append(f"{len(files)} file(s), {sum(f.bytes for f in files) / 1e6:.1f} MB")
    return _show(
        args.json,
        files,
        f"work memo in {work_folder()}",
        "none (the first process on this machine writes it)",
        f"{'size':>9} {'idle':>9}  {'state':15} file",
        lines,
    )


def _clear_work(args: argparse.Namespace) -> int:
    from cm_gym.core.workmemo_files import clear_work

    removed, skipped = clear_work(args.unused_days, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for f in removed:
        print(f"{verb} {f.path} ({f.bytes / 1e6:.1f} MB, idle {f.idle_days():.1f} d)")
    for f in skipped:
        print(f"skipped {f.path}: in use by another process", file=sys.stderr)
    print(
        f"{verb} {len(removed)} work memo file(s), {sum(f.bytes for f in removed) / 1e6:.1f} MB; "
        f"{len(skipped)} in use"
    )
    return 0
