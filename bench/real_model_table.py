"""The README's real-model table from `cm-gym run` results: one Markdown row per results.json.

    python bench/real_model_table.py LABEL=RUN_DIR/results.json [LABEL=...]

Columns: records formed (and their contrast kinds), first-decision None, None at the decision
budget, Top-1, Random, CF Memory (paper and extended z_t), Oracle (score, mean over selector
seeds), CF Memory (paper z_t) − None and − Random with their two-level paired 95% CIs (seeds and
tasks resampled; `cm_gym.envs.metrics.two_level_paired_bootstrap`), oracle − random head-room, and
the real / simulated reply counts.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from cm_gym.envs.metrics import two_level_paired_bootstrap


def _score(results: dict[str, Any], policy: str, key: str = "score") -> str:
    p = results["policies"].get(policy)
    if p is None:
        return "—"
    return f"{p['mean'][key]['mean']:.1f}"


def _seeds(results: dict[str, Any], policy: str) -> dict[int, dict[str, float]]:
    per = results["policies"][policy]["per_task_scores"]
    return {int(s): dict(v) for s, v in per.items()}


def _ci(results: dict[str, Any], treated: str, baseline: str) -> str:
    if treated not in results["policies"] or baseline not in results["policies"]:
        return "—"
    ci = two_level_paired_bootstrap(_seeds(results, treated), _seeds(results, baseline))
    if ci["diff"] is None:
        return "—"
    return f"{ci['diff']:+.1f} [{ci['lo']:+.1f}, {ci['hi']:+.1f}]"


def _kinds(results: dict[str, Any]) -> str:
    store = Path(results["snapshot"]["path"])
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            keys = [row[0] for row in db.execute("SELECT contrast_key FROM records")]
    except sqlite3.Error:
        return ""
    # SQL keys start with their kind ("order:…"); a program's key is its diff: counted as "edit"
    kinds = Counter(
        k.split(":", 1)[0] if re.fullmatch(r"[a-z_]{1,24}", k.split(":", 1)[0]) else "edit" for k in keys if k
    )
    return ", ".join(f"{k} {n}" for k, n in kinds.most_common(4))


def row(label: str, path: Path) -> str:
    r = json.loads(path.read_text())
    n = r["snapshot"]["records"]
    kinds = _kinds(r)
    replies = r.get("llm", {}).get("replies") or {}
    cells = [
        label,
        f"{n}" + (f" ({kinds})" if kinds else ""),
        _score(r, "none", "first_decision_score"),
        _score(r, "none"),
        _score(r, "top1"),
        _score(r, "random"),
        _score(r, "cf_memory"),
        _score(r, "cf_memory_extended"),
        _score(r, "oracle"),
        _ci(r, "cf_memory", "none"),
        _ci(r, "cf_memory", "random"),
        _ci(r, "oracle", "random"),
        f"{replies.get('real', 0):,} / {replies.get('simulated', 0):,}" if replies else "— (simulator)",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| run | records | None, 1st decision | None | Top-1 | Random | CF Memory | CF Memory (ext.) | Oracle "
    "| CF − None [95% CI] | CF − Random [95% CI] | Oracle − Random | replies real / simulated |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    print(HEADER)
    for arg in sys.argv[1:]:
        label, _, path = arg.partition("=")
        print(row(label, Path(path)))


if __name__ == "__main__":
    main()
