"""The README's real-mistake table (issue 32) from `cm-gym run` output folders.

    python bench/real_mistake_table.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds a `results.json` of `cm-gym run --benchmark SpiderSQL --llm recorded:<system>`
(all policies) or of `--llm recorded:<system>+cascade --policies none` (the Cascade column). Runs
are grouped by system (the LLM spec less ``+cascade``) and split (`split.kind`); one row per group,
in the order the main runs were given. Nothing is typed in: every cell is read from a results.json,
its store (`snapshot.path`: the records' contrast kinds) or its `memory/build_summary.json`.

Main table columns: held-out tasks, records formed (contrast kinds; a⁻ / a⁺ provenance),
retrieval coverage (share of None's decisions at which retrieval offered a record, pooled over
seeds), None at the first decision and at the decision budget, Cascade (first / budget, from the
cascade run), Top-1, Random, CF Memory (paper and extended z_t), Oracle (budget scores, mean over
selector seeds), and the two-level paired 95% CIs (seeds and tasks resampled) of CF Memory (paper
z_t) − Random and − Top-1 (as the run stored them) and Oracle − None (computed here with the same
`two_level_paired_bootstrap`; the tasks the oracle rescues in brackets). A second table gives the
details: sizes, the records' contrasts, candidates refused for a simulated a⁻, the extended layout's CIs, the held-out tasks
Top-1 rescues / breaks, the oracle's rescued tasks, and real / simulated replies.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from cm_gym.envs.metrics import two_level_paired_bootstrap

CASCADE = "+cascade"
SPLIT_NAMES = {"sampled": "paper's (tasks by seed)", "environments": "databases apart"}


def load(run_dir: Path) -> dict[str, Any]:
    """results.json of a run folder (or the file itself), with the folder kept under ``_dir``."""
    path = run_dir / "results.json" if run_dir.is_dir() else run_dir
    results = json.loads(path.read_text())
    results["_dir"] = str(path.parent)
    return results


def system(results: dict[str, Any]) -> tuple[str, bool]:
    """``(LLM spec without +cascade, whether it is the cascade)``."""
    llm = str(results["config"]["llm"])
    return (llm[: -len(CASCADE)], True) if llm.endswith(CASCADE) else (llm, False)


def split_name(results: dict[str, Any]) -> str:
    kind = results["split"]["kind"]
    return SPLIT_NAMES.get(kind, kind)


def _mean(results: dict[str, Any], policy: str, key: str = "score") -> float | None:
    p = results["policies"].get(policy)
    return None if p is None else p["mean"][key]["mean"]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def _ci(ci: dict[str, Any] | None) -> str:
    if not ci or ci.get("diff") is None:
        return "—"
    return f"{_signed(ci['diff'])} [{_signed(ci['lo'])}, {_signed(ci['hi'])}]"


def _stored_ci(results: dict[str, Any], policy: str, versus: str) -> str:
    p = results["policies"].get(policy)
    return "—" if p is None else _ci(p.get("paired_ci_two_level", {}).get(versus))


def _per_task(results: dict[str, Any], policy: str) -> dict[int, dict[str, float]]:
    return {int(s): dict(v) for s, v in results["policies"][policy]["per_task_scores"].items()}


def oracle_minus_none(results: dict[str, Any]) -> dict[str, Any] | None:
    pol = results["policies"]
    if "oracle" not in pol or "none" not in pol:
        return None
    return two_level_paired_bootstrap(_per_task(results, "oracle"), _per_task(results, "none"))


def changed_ids(results: dict[str, Any], policy: str, which: str) -> list[str]:
    """Held-out tasks a policy rescued (``which="rescued"``) or broke against None, any seed."""
    p = results["policies"].get(policy)
    if p is None:
        return []
    return sorted({t for seed in p.get("paired_vs_none") or [] for t in seed.get(f"{which}_ids", [])})


def contrast_keys(results: dict[str, Any]) -> list[str]:
    """The `contrast_key` of every record in the run's frozen store (`snapshot.path`, or the file
    of that name in the run's `memory/` folder when the run folder was moved)."""
    store = Path(results["snapshot"]["path"])
    if not store.exists():
        store = Path(results["_dir"]) / "memory" / store.name
    if not store.exists():
        return []
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return sorted(row[0] for row in db.execute("SELECT contrast_key FROM records") if row[0])
    except sqlite3.Error:
        return []


def kinds(results: dict[str, Any]) -> Counter[str]:
    """Contrast kinds of the store's records (the part of `contrast_key` before the first colon)."""
    return Counter(k.split(":", 1)[0] for k in contrast_keys(results))


def provenance(results: dict[str, Any]) -> str:
    prov = results["snapshot"].get("provenance") or {}

    def side(name: str) -> str:
        counts = prov.get(name) or {}
        return "+".join(f"{k} {n}" if len(counts) > 1 else k for k, n in sorted(counts.items())) or "—"

    return f"{side('a_minus')} / {side('a_plus')}"


def build_summary(results: dict[str, Any]) -> dict[str, Any]:
    path = Path(results["_dir"]) / "memory" / "build_summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def records_cell(results: dict[str, Any]) -> str:
    n = results["snapshot"]["records"]
    k = kinds(results)
    parts = (
        [", ".join(f"{kind} {c}" for kind, c in sorted(k.items(), key=lambda kc: (-kc[1], kc[0])))]
        if k
        else []
    )
    if n:
        parts.append(f"a⁻/a⁺ {provenance(results)}")
    return f"{n}" + (f" ({'; '.join(parts)})" if parts else "")


def coverage(results: dict[str, Any]) -> str:
    pooled = results["policies"]["none"]["mean"]["retrieval_coverage"].get("pooled") or {}
    value = pooled.get("value")
    return "—" if value is None else f"{100 * value:.0f}%"


def group(runs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """``(main run, its cascade run or None)`` per (system, split), in the main runs' order."""
    cascades = {(system(r)[0], r["split"]["kind"]): r for r in runs if system(r)[1]}
    return [(r, cascades.get((system(r)[0], r["split"]["kind"]))) for r in runs if not system(r)[1]]


def main_row(run: dict[str, Any], cascade: dict[str, Any] | None) -> str:
    om = oracle_minus_none(run)
    rescued = changed_ids(run, "oracle", "rescued")
    cells = [
        f"`{system(run)[0]}`",
        split_name(run),
        str(run["split"]["eval"]),
        records_cell(run),
        coverage(run),
        _fmt(_mean(run, "none", "first_decision_score")),
        _fmt(_mean(run, "none")),
        (
            f"{_fmt(_mean(cascade, 'none', 'first_decision_score'))} / {_fmt(_mean(cascade, 'none'))}"
            if cascade
            else "—"
        ),
        _fmt(_mean(run, "top1")),
        _fmt(_mean(run, "random")),
        _fmt(_mean(run, "cf_memory")),
        _fmt(_mean(run, "cf_memory_extended")),
        _fmt(_mean(run, "oracle")),
        _stored_ci(run, "cf_memory", "vs_random"),
        _stored_ci(run, "cf_memory", "vs_top1"),
        _ci(om) + (f" ({len(rescued)} task{'s' if len(rescued) != 1 else ''})" if om else ""),
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| system | split | held-out | records (kinds; a⁻/a⁺) | coverage | None, 1st decision | None "
    "| Cascade (1st / budget) | Top-1 | Random | CF Memory | CF Memory (ext.) | Oracle "
    "| CF − Random | CF − Top-1 | Oracle − None |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)

DETAIL_HEADER = (
    "| system | split | build / train / eval | seeds × decisions | contrasts | refused (a⁻ not real) "
    "| CF (ext.) − Random | CF (ext.) − Top-1 | Top-1 rescues / breaks | Oracle rescues "
    "| replies real / simulated |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def _ids(ids: list[str], limit: int = 6) -> str:
    if not ids:
        return "none"
    shown = ", ".join(f"`{t}`" for t in ids[:limit])
    return shown + (f" (+{len(ids) - limit})" if len(ids) > limit else "")


def detail_row(run: dict[str, Any]) -> str:
    cfg, split = run["config"], run["split"]
    summary = build_summary(run)  # a reason never counted is absent from `rejected`: 0
    refused = (summary.get("rejected") or {}).get("a_minus_not_real", 0) if summary else None
    replies = (run.get("llm") or {}).get("replies") or {}
    cells = [
        f"`{system(run)[0]}`",
        split_name(run),
        f"{split['build']} / {split['train']} / {split['eval']}",
        f"{len(cfg['seeds'])} × {cfg['total_decisions']}",
        ", ".join(f"`{k}`" for k in contrast_keys(run)) or "none",
        "—" if refused is None else str(refused),
        _stored_ci(run, "cf_memory_extended", "vs_random"),
        _stored_ci(run, "cf_memory_extended", "vs_top1"),
        f"{_ids(changed_ids(run, 'top1', 'rescued'))} / {_ids(changed_ids(run, 'top1', 'broken'))}",
        _ids(changed_ids(run, "oracle", "rescued")),
        f"{replies.get('real', 0):,} / {replies.get('simulated', 0):,}",
    ]
    return "| " + " | ".join(cells) + " |"


def tables(run_dirs: list[Path]) -> str:
    groups = group([load(Path(d)) for d in run_dirs])
    lines = [
        HEADER,
        *(main_row(r, c) for r, c in groups),
        "",
        DETAIL_HEADER,
        *(detail_row(r) for r, _ in groups),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.exit(__doc__)
    print(tables([Path(a) for a in args]))


if __name__ == "__main__":
    main()
