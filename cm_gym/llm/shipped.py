"""Real-model runs shipped with cm_gym: replay them anywhere with 0 live calls.

Every reply a local model (`cm_gym.llm.local_llm`) gave in the project's own real runs is exported
into the package (``cm_gym/llm/real_runs/<model>.jsonl.gz``, the checksummed format of
`cm_gym.llm.cache_io`, each entry carrying the exact request its key hashes), with a manifest
beside it (``<model>.manifest.json``: the checkpoint's sha256, the prompt variants' digest, the
cm_gym version, entries per template and per benchmark). They are cm_gym's own output, so they
ship; the weights never do.

`shipped_cache(model)` verifies the export once and merges it into a cache file under
``$CM_GYM_CACHE/llm/`` (stamped with the export's digest, so a later call opens it without reading
the export again); `make_llm("local:<model>", cache_mode="ro")` with no cache file replays from
it, so ``cm-gym run --llm local:<model> --llm-cache-mode ro`` needs no engine and no weights. A
call the export does not hold is one `CacheMissError`, never a silent simulation. In "rw" mode the
same file is the default cache: the shipped replies are reused and new ones are added to it.

`ship(cache_file, model)` (used by ``bench/ship_real_run.py``) merges a run's cache into the export:
only the entries answered by `model` with the current prompts, old entries kept, atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.core.version import __version__ as CM_GYM_VERSION
from cm_gym.llm.errors import CacheError

logger = logging.getLogger(__name__)

SHIPPED_DIR = Path(__file__).resolve().parent / "real_runs"


def export_path(model: str, folder: Path | None = None) -> Path:
    return (folder or SHIPPED_DIR) / f"{model}.jsonl.gz"


def manifest_path(model: str, folder: Path | None = None) -> Path:
    return (folder or SHIPPED_DIR) / f"{model}.manifest.json"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def shipped_cache(model: str, *, folder: Path | None = None) -> Path:
    """The cache file holding the shipped replies of `model` (merged on first use), or the plain
    per-model cache file when nothing is shipped for it."""
    from cm_gym.llm.cache import ResponseCache
    from cm_gym.llm.cache_io import merge_export, read_export

    target = cache_dir("llm") / f"local-{model}.sqlite"
    export = export_path(model, folder)
    if not export.is_file():
        return target
    digest = _digest(export)
    stamp = target.with_name(target.name + ".shipped")
    try:
        if stamp.read_text().strip() == digest and target.is_file():
            return target
    except OSError:
        pass
    verified = read_export(export)
    cache = ResponseCache(target, "rw")
    try:
        report = merge_export(cache, verified, skip_conflicts=True)
    finally:
        cache.close()
    if report.conflicts:
        logger.warning(
            "%d shipped replies of %s differ from replies already in %s; the cached ones were kept",
            len(report.conflicts), model, target,
        )  # fmt: skip
    stamp.write_text(digest)
    logger.info(
        "merged %d shipped replies of %s into %s (%d already there)",
        report.added,
        model,
        target,
        report.present,
    )
    return target


def _identity(request: Any) -> dict[str, Any]:
    return dict(request.get("identity", {})) if isinstance(request, dict) else {}


#: Options of a run's command that name where it ran, not what it computed (left out of the replay).
_LOCAL_OPTIONS = {"--llm-cache": 1, "--out-dir": 1, "--overwrite": 0, "--llm-timeout": 1, "--no-progress": 0}


def replay_command(command: str) -> list[str]:
    """The arguments of `cm-gym run` that reproduce a shipped run, without its local options."""
    import shlex

    argv, out = shlex.split(command), []
    argv = argv[1:] if argv and argv[0].endswith("cm-gym") else argv
    i = 0
    while i < len(argv):
        skip = _LOCAL_OPTIONS.get(argv[i].split("=", 1)[0])
        if skip is None:
            out.append(argv[i])
            i += 1
        else:
            i += 1 + (skip if "=" not in argv[i] else 0)
    return out


def run_entry(results_file: Path) -> dict[str, Any]:
    """What the manifest keeps of a shipped run: its replay command and its scores (the replay
    test checks that a replay gives them back exactly)."""
    from cm_gym.core import boundedjson

    results = boundedjson.loads(
        results_file.read_bytes(), max_bytes=64 << 20, max_depth=64, what=str(results_file)
    )
    policies = results.get("policies", {})
    return {
        "benchmark": results.get("config", {}).get("benchmark", ""),
        "command": replay_command(results.get("provenance", {}).get("command", "")),
        "split": results.get("split", {}).get("label", ""),
        "scores": {name: p.get("mean", {}).get("score", {}).get("mean") for name, p in policies.items()},
        "replies": results.get("llm", {}).get("replies", {}),
    }


def ship(
    cache_file: Path,
    model: str,
    *,
    folder: Path | None = None,
    benchmark: str = "",
    results: Path | None = None,
) -> dict[str, Any]:
    """Merge the replies of `model` (current prompts) in `cache_file` into the shipped export and
    rewrite its manifest (with the run's replay command and scores when its `results` file is
    given); returns the manifest. Entries already shipped are kept."""
    from cm_gym.llm.cache import ResponseCache
    from cm_gym.llm.cache_io import export_cache, merge_export, read_export
    from cm_gym.llm.local_llm import LocalLLM

    identity = LocalLLM(model).cache_identity()
    folder = folder or SHIPPED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    work = folder / f".{model}.merge.sqlite"
    work.unlink(missing_ok=True)
    merged = ResponseCache(work, "rw")
    try:
        if export_path(model, folder).is_file():
            merge_export(merged, read_export(export_path(model, folder)))
        source = ResponseCache(cache_file, "ro")
        try:
            from cm_gym.llm.cache import decode_request

            rows = []
            for key, template, value, created, blob in source.rows():
                if blob is None:
                    continue
                request = decode_request(blob)[1]
                if _identity(request) == identity:
                    rows.append((key, template, value, created, blob))
        finally:
            source.close()
        held = merged.values_of([r[0] for r in rows])
        added = merged.insert_rows([r for r in rows if r[0] not in held]) if rows else 0
        count = export_cache(merged, export_path(model, folder))
        templates = Counter(template for _, template, _, _, _ in merged.rows())
    finally:
        merged.close()
        work.unlink(missing_ok=True)
        for side in ("-wal", "-shm", "-journal"):
            work.with_name(work.name + side).unlink(missing_ok=True)
    old = {}
    with contextlib.suppress(OSError, ValueError):
        from cm_gym.core import boundedjson

        old = boundedjson.loads(manifest_path(model, folder).read_bytes(), max_bytes=4 << 20, max_depth=32)
    runs = [r for r in old.get("runs", []) if isinstance(r, dict)]
    if results is not None:
        entry = run_entry(results)
        runs = [r for r in runs if r.get("command") != entry["command"]] + [entry]
    benchmarks = dict(old.get("added_by_benchmark", {}))
    if benchmark and added:
        benchmarks[benchmark] = benchmarks.get(benchmark, 0) + added
    manifest = {
        "model": model,
        "sha256": identity["sha256"],
        "engine": identity["engine"],
        "prompts": identity["prompts"],
        "cm_gym_version": CM_GYM_VERSION,
        "entries": count,
        "by_template": dict(sorted(templates.items())),
        "added_by_benchmark": benchmarks,
        "export_sha256": _digest(export_path(model, folder)),
        "runs": runs,
    }
    manifest_path(model, folder).write_text(json.dumps(manifest, indent=2) + "\n")
    if count == 0:
        raise CacheError(f"{cache_file} holds no reply of {model} with the current prompts")
    return manifest
