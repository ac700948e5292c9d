"""`cm-gym memory`: inspect a record store or snapshot (never writes to it).

cm-gym memory list STORE [--limit N]
cm-gym memory show STORE ID            (a unique id prefix is enough)
cm-gym memory export STORE [--format jsonl] [--out FILE]
cm-gym memory stats STORE
cm-gym memory verify SNAPSHOT          (manifest hash + SQLite integrity)
cm-gym memory reverify STORE --env CHANGED --out NEW   (stale / repairable records; a NEW snapshot)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="list, show, export, verify or freeze the records of a store")
    msub = p.add_subparsers(dest="memory_command", metavar="ACTION")
    msub.required = True
    q = msub.add_parser("list", help="one line per record")
    q.add_argument("store", type=Path, help="a record store or frozen snapshot (.sqlite)")
    q.add_argument("--limit", type=int, default=None, help="show only the first N records")
    q.set_defaults(func=run_list)
    q = msub.add_parser("show", help="one record in full, as the agent would see it")
    q.add_argument("store", type=Path, help="a record store or frozen snapshot (.sqlite)")
    q.add_argument("record_id", help="record id (a unique prefix is enough)")
    q.add_argument("--no-condition", action="store_true", help="render as RECORD_RENDER_NO_CONDITION")
    q.set_defaults(func=run_show)
    q = msub.add_parser("export", help="every record as JSON Lines")
    q.add_argument("store", type=Path, help="a record store or frozen snapshot (.sqlite)")
    q.add_argument("--format", choices=("jsonl",), default="jsonl", help="output format (JSON Lines)")
    q.add_argument("--out", type=Path, default=None, help="file to write (default stdout)")
    q.set_defaults(func=run_export)
    q = msub.add_parser("stats", help="counts, contrast keys, conditions, reuse statistics")
    q.add_argument("store", type=Path, help="a record store or frozen snapshot (.sqlite)")
    q.set_defaults(func=run_stats)
    q = msub.add_parser("verify", help="check a snapshot against its manifest and SQLite's integrity check")
    q.add_argument("store", type=Path, help="a record store or frozen snapshot (.sqlite)")
    q.set_defaults(func=run_verify)
    q = msub.add_parser("freeze", help="freeze a store into a read-only, hash-verified snapshot")
    q.add_argument("store", type=Path, help="a record store or frozen snapshot (.sqlite)")
    q.add_argument("snapshot", type=Path, help="the snapshot file to write")
    q.add_argument("--overwrite", action="store_true", help="replace an existing snapshot")
    q.add_argument(
        "--ann",
        choices=("auto", "on", "off"),
        default="auto",
        help="ANN index for retrieval (needs cm-gym[ann]); auto: from 20,000 records on",
    )
    q.set_defaults(func=run_freeze)
    q = msub.add_parser(
        "reverify",
        help="re-check every record on a changed environment; write a NEW snapshot (stale ones retired)",
        description=(
            "Re-run each record's a-/a+ contrast through the world model on a changed environment and "
            "mark it valid, repairable (one local edit of a+ restores the improvement: a new record "
            "replaces it) or stale (retired from retrieval, reason kept). The store is only read; the "
            "result is a new frozen snapshot OUT and OUT.reverify.json with every verdict."
        ),
    )
    q.add_argument("store", type=Path, help="a frozen snapshot (or a live store, read only)")
    q.add_argument(
        "--env",
        required=True,
        help="a changed environment folder (`cm-gym env change`), or a benchmark name for its current one",
    )
    q.add_argument("--out", type=Path, required=True, help="the new snapshot to write")
    q.add_argument("--llm", default="simulated", help="LLM for repairs (default simulated; openai[:model])")
    q.add_argument("--llm-seed", type=int, default=0, help="seed of the LLM (default 0)")
    q.add_argument("--llm-cache", type=Path, default=None, help="LLM response cache file")
    q.add_argument("--llm-cache-mode", choices=("rw", "ro", "off"), default="rw", help="response cache mode")
    q.add_argument("--agent", choices=("react", "reflexion"), default="react", help="prompts' agent kind")
    q.add_argument(
        "--K", type=int, default=4, help="alternatives tried per repair (default 4; 0: no repairs)"
    )
    q.add_argument("--no-repair", action="store_true", help="only valid / stale, no repair search")
    q.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    q.set_defaults(func=run_reverify)


def _open(path: Path) -> Any:
    from cm_gym.memory.snapshot import load_readonly

    return load_readonly(path)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, n: int) -> str:
    text = _one_line(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def run_list(args: argparse.Namespace) -> int:
    from cm_gym.core.tables import render

    store = _open(args.store)
    records = store.records[: args.limit] if args.limit else store.records
    rows = [["id", "contrast key", "Δ", "u", "uses", "source", "condition"]]
    rows += [
        [r.record_id, _one_line(r.contrast_key), f"{r.delta:.2f}", f"{r.u:+.3f}", str(r.uses),
         _one_line(r.source_task_id), _one_line(r.condition or "none")]
        for r in records
    ]  # fmt: skip
    # the condition (the last column) wraps first; nothing is cut
    print("\n".join(render(rows, wrap=len(rows[0]) - 1, right=(2, 3, 4))))
    print(f"{len(records)} of {len(store)} records ({store.domain}, {store.path})")
    return 0


#: What the provenance marks mean (`cm_gym.memory.record.PROVENANCES`), printed beside them.
PROVENANCE_NOTE = (
    "real = a real system's output verbatim, real-revision = a real model's revision, "
    "simulated = the simulated LLM's text, edit = a rule-based edit, unknown = not recorded"
)


def run_show(args: argparse.Namespace) -> int:
    from cm_gym.memory.retrieval import record_view

    store = _open(args.store)
    try:
        r = store.get(args.record_id)
    except KeyError as exc:
        print(f"cm-gym: error: no record {exc} in {args.store}", file=sys.stderr)
        return 2
    ev = r.evidence
    print(f"record        {r.record_id}")
    print(f"source task   {r.source_task_id} (environment {r.env_id}, domain {r.domain})")
    print(f"contrast key  {r.contrast_key}")
    print(f"situation q   {r.situation}")
    print(f"condition c   {r.condition or 'none (always applicable)'}")
    print(f"a-            {r.a_minus}")
    print(f"a+            {r.a_plus}")
    print(f"provenance    a- {r.a_minus_provenance}, a+ {r.a_plus_provenance} ({PROVENANCE_NOTE})")
    print(f"transform     {r.transform or 'none (bound to its source; the LLM reviser only)'}")
    print(f"evidence e    score {ev.get('score_minus')} -> {ev.get('score_plus')} (Δ = {r.delta:.3f})")
    for key, label in (("feedback_minus", "a- feedback"), ("feedback_plus", "a+ feedback")):
        if ev.get(key):
            print(f"  {label:12}{_short(str(ev[key]), 200)}")
    print(f"admission     S_adm = {r.admission_score:.3f}, created #{r.created_order}")
    status = r.status + (f" ({r.status_reason})" if r.status_reason else "")
    print(f"freshness     {status}; verified on environment version {r.env_version or 'unknown'}")
    if r.replaces:
        print(f"repairs       {r.replaces}")
    print(
        f"reuse         u = {r.u:+.3f}; {r.uses} uses: {r.helpful} helpful, {r.neutral} neutral, "
        f"{r.harmful} harmful (helpful fraction {r.helpful_fraction:.2f})"
    )
    print("\nas shown to the agent:\n" + record_view(r, show_condition=not args.no_condition).rendered)
    return 0


def run_export(args: argparse.Namespace) -> int:
    store = _open(args.store)
    lines = [json.dumps(r.to_dict(), ensure_ascii=False, sort_keys=True) for r in store.records]
    text = "\n".join(lines) + ("\n" if lines else "")
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {len(lines)} records to {args.out}", file=sys.stderr)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    store = _open(args.store)
    records = store.records
    keys = Counter(r.contrast_key for r in records)
    conds = sum(1 for r in records if r.condition)
    used = [r for r in records if r.uses]
    print(f"store         {store.path}")
    print(f"domain        {store.domain} (benchmark {store.benchmark or '-'})")
    print(f"embedder      {store.embedder_id} (dim {store.dim})")
    print(f"records       {len(records)} / capacity {store.capacity}")
    print(
        f"source tasks  {len({r.source_task_id for r in records})} with records, {len(store.processed_task_ids)} processed"
    )
    print(f"conditions    {conds} conditional, {len(records) - conds} unconditional")
    retired = sum(1 for r in records if not r.active)
    if retired or any(r.replaces for r in records):
        repaired = sum(1 for r in records if r.replaces)
        print(f"freshness     {retired} retired (never retrieved), {repaired} repaired records")
    if used:
        print(
            f"reuse         {len(used)} records used {sum(r.uses for r in used)} times; "
            f"mean u {sum(r.u for r in records) / len(records):+.3f}; "
            f"helpful {sum(r.helpful for r in records)}, neutral {sum(r.neutral for r in records)}, "
            f"harmful {sum(r.harmful for r in records)}"
        )
    print("contrast keys " + (", ".join(f"{k} ×{n}" for k, n in keys.most_common(12)) or "none"))
    counters = store.counters
    if counters.get("tasks"):
        print(
            "construction  "
            + ", ".join(
                f"{k} {int(v)}"
                for k, v in sorted(counters.items())
                if k.startswith(
                    ("admitted", "rejected_", "evicted", "alternatives_checked", "verification_calls")
                )
            )
        )
    if getattr(store, "manifest", None):
        m = store.manifest
        print(f"snapshot      sha256 {m['sha256']} created {m.get('created')}")
        if isinstance(m.get("ann"), dict):
            a = m["ann"]
            print(f"ANN index     {a['file']}: {a['params'].get('kind')}, {a['bytes'] / 2**20:.1f} MiB")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from cm_gym.memory.manifest import is_sealed
    from cm_gym.memory.schema import connect_ro, integrity_ok
    from cm_gym.memory.snapshot import FrozenStore

    snap = FrozenStore.open(args.store)  # raises StoreError on a mismatch
    conn = connect_ro(args.store, immutable=True)
    try:
        ok = integrity_ok(conn)
    finally:
        conn.close()
    print(f"{args.store}: sha256 matches manifest; {len(snap)} records; integrity {'ok' if ok else 'FAILED'}")
    sealed = is_sealed(snap.manifest)
    print(
        "manifest: "
        + ("sealed (every field hashed)" if sealed else "format 1, unsealed (freeze again to seal it)")
    )
    if "ann" in snap.manifest:
        loaded = not snap.ann_problem and snap.ann_index is not None
        state = snap.ann_problem or ("sha256 matches manifest" if loaded else "not checked (no faiss-cpu)")
        print(f"ANN index: {state}")
    return 0 if ok and not snap.ann_problem else 1


def run_freeze(args: argparse.Namespace) -> int:
    from cm_gym.memory.errors import StoreError
    from cm_gym.memory.snapshot import manifest_path
    from cm_gym.memory.store import RecordStore

    if not args.store.is_file():
        raise StoreError(f"store not found: {args.store}")
    if manifest_path(args.store).is_file():
        raise StoreError(f"{args.store} is already a frozen snapshot")
    with RecordStore(args.store) as store:
        ann = {"auto": None, "on": True, "off": False}[args.ann]
        snap = store.freeze(args.snapshot, overwrite=args.overwrite, ann=ann)
    entry = snap.manifest.get("ann")
    side = f"; ANN index {entry['file']} ({entry['bytes'] / 2**20:.1f} MiB)" if entry else ""
    print(f"{args.snapshot}: {len(snap)} records, sha256 {snap.manifest['sha256']}{side}")
    return 0


def run_reverify(args: argparse.Namespace) -> int:
    from cm_gym.domains.environment import load_environment
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.llm.factory import make_llm
    from cm_gym.memory.reverify import ReverifyConfig, report_path, reverify_store

    source = _open(args.store)
    folder = Path(args.env)
    if folder.exists():
        env = load_environment(folder)
        tasks, label, domain_name = list(env.tasks), env.label, env.domain
    else:
        spec = get_benchmark(args.env)
        tasks, label, domain_name = spec.load(), f"{spec.name}:current", spec.domain_name
    domain = get_domain(domain_name)
    llm = make_llm(
        args.llm,
        seed=args.llm_seed,
        cache_path=args.llm_cache,
        cache_mode=args.llm_cache_mode,
        task_lookup={t.task_id: t for t in tasks},
    )
    cfg = ReverifyConfig(K=args.K, repair=not args.no_repair, agent_kind=args.agent)
    bar = _bar(len(source))
    summary = reverify_store(
        source,
        args.out,
        tasks,
        domain,
        domain.make_evaluator(),
        llm,
        cfg,
        environment=label,
        overwrite=args.overwrite,
        progress=(lambda done, total: bar.update(1)) if bar is not None else None,
    )
    if bar is not None:
        bar.close()
    print(summary.format())
    print(f"wrote {args.out} ({summary.records_out} records) and {report_path(args.out).name}")
    return 0


def _bar(total: int) -> Any:
    """A progress bar on stderr (None when CM_GYM_PROGRESS=0)."""
    import os

    if os.environ.get("CM_GYM_PROGRESS", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="reverify", unit="record", file=sys.stderr, mininterval=1.0)
