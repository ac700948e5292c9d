"""`cm-gym calibrate --llm-cache FILE`: fit the revision rates to a cached run of a real model.

Every REVISE_WITH_RECORD entry of the SQLite response cache (`cm_gym.llm.cache`) holds its
request — the rendered prompt (draft, record a⁻ and a⁺, task id) and the model's reply. Each entry is binned by
the record's closeness to the draft (`Domain.record_closeness`, the same function the simulator
uses) and its reply classified, on the domain's canonical form (`Domain.canonical_action`), as

* unchanged — the draft came back;
* applied — the record's contrast where it matches (`Domain.apply_contrast`);
* over-applied — an edit of the record's kind at another site (`Domain.analogous_edits`);
* disturbed — anything else (another edit, a rewrite).

The rates are the shares per bin: apply = applied / match, match_disturb = other changes / match,
overapply = over-applied / analogous, analogous_disturb = other changes / analogous,
unrelated_disturb = changes / unrelated. Each is reported with its count and a 95% Wilson
interval. Thin evidence is refused: a rate whose bin holds fewer than ``--min-count`` entries
(default `MIN_COUNT`) keeps the domain's default, and the result names those rates and their
counts; when no rate has enough entries, nothing is written (one `CalibrationError` naming them).
A draft that holds no usable action (`Domain.parse_problem`) cannot be binned and is counted apart,
as are entries written before the cache stored prompts; a usable draft revised into a reply
without a usable action is a change (disturbed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import CLOSENESS, Domain, RevisionRates
from cm_gym.llm.base import REVISE_WITH_RECORD

CLASSES = ("unchanged", "applied", "overapplied", "disturbed")
#: entries a closeness bin needs before its rates are fitted (`--min-count`): with 20, a 95%
#: interval on a share is at most about ±0.2 wide on either side
MIN_COUNT = 20
#: rate -> (closeness bin, the classes it counts)
PLAN: dict[str, tuple[str, tuple[str, ...]]] = {
    "apply": ("match", ("applied",)),
    "match_disturb": ("match", ("overapplied", "disturbed")),
    "overapply": ("analogous", ("overapplied",)),
    "analogous_disturb": ("analogous", ("applied", "disturbed")),
    "unrelated_disturb": ("unrelated", ("applied", "overapplied", "disturbed")),
}


class CalibrationError(CmGymError):
    """The response cache cannot calibrate anything (no usable REVISE_WITH_RECORD entries)."""


def classify(
    domain: Domain, task: Task, draft: str, a_minus: str, a_plus: str, reply: str
) -> tuple[str, str]:
    """(closeness, class) of one revision `reply` of `draft` shown the record a⁻ → a⁺."""
    canon = domain.canonical_action
    closeness = domain.record_closeness(task, draft, a_minus, a_plus)
    reply = reply if reply.strip() else draft
    if not domain.action_changed(draft, reply):
        return closeness, "unchanged"
    got = canon(reply)
    applied = domain.apply_contrast(task, draft, a_minus, a_plus)
    if applied is not None and got == canon(applied):
        return closeness, "applied"
    if any(got == canon(t) for t in domain.analogous_edits(task, draft, a_minus, a_plus)):
        return closeness, "overapplied"
    return closeness, "disturbed"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a share k / n ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_evidence(counts: dict[str, Counter[str]]) -> dict[str, dict[str, Any]]:
    """Per rate: its bin, the entries counted (k of n), the share and its 95% interval."""
    out: dict[str, dict[str, Any]] = {}
    for rate, (bin_, names) in PLAN.items():
        n = sum(counts[bin_].values())
        k = sum(counts[bin_][c] for c in names)
        low, high = wilson(k, n)
        out[rate] = {"bin": bin_, "k": k, "n": n, "share": k / n if n else None, "ci95": [low, high]}
    return out


def rates_from_counts(
    counts: dict[str, Counter[str]], default: RevisionRates, min_count: int = 1
) -> tuple[RevisionRates, list[str]]:
    """The rates per closeness bin from classified counts; a rate whose bin holds fewer than
    `min_count` entries keeps `default` (and is listed)."""
    values = default.as_dict()
    kept: list[str] = []
    for rate, evidence in rate_evidence(counts).items():
        if evidence["n"] < max(1, min_count):
            kept.append(rate)
        else:
            values[rate] = round(evidence["share"], 4)
    return RevisionRates(**values), kept


def fit_from_cache(cfg: Any) -> dict[str, Any]:
    """Classify the cache's revisions for `cfg.benchmark`'s domain and write a rates file."""
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.llm.cache import ResponseCache, decode_request
    from cm_gym.llm.errors import PromptError
    from cm_gym.llm.prompts import parse_rendered
    from cm_gym.llm.revision import save_revision_rates

    started = time.perf_counter()
    spec = get_benchmark(cfg.benchmark)
    domain = get_domain(spec.domain_name)
    try:
        tasks = {t.task_id: t for t in spec.load_tasks()}
    except CmGymError:
        tasks = {}
    counts: dict[str, Counter[str]] = {c: Counter() for c in CLOSENESS}
    skipped: Counter[str] = Counter()
    with ResponseCache(Path(cfg.llm_cache), mode="ro") as cache:
        for _, template, raw, _, blob in cache.rows():
            if template != REVISE_WITH_RECORD:
                continue
            if blob is None:
                skipped["no stored request (cached by an older cm_gym)"] += 1
                continue
            try:
                value = json.loads(raw)
                _, f = parse_rendered(decode_request(blob)[1]["messages"])
            except (PromptError, ValueError, KeyError, TypeError):
                skipped["request of another template version or unreadable"] += 1
                continue
            if f.get("action_kind") != domain.action_kind:
                skipped[f"another domain ({f.get('action_kind')})"] += 1
                continue
            found = tasks.get(f.get("task_id", ""))
            task = (
                dataclasses.replace(found, reference="")
                if found
                else Task(f.get("task_id", ""), domain.name, "", "", "")
            )
            draft = f["draft"].strip()
            if domain.parse_problem(draft) is not None:
                skipped["draft holds no usable action"] += 1
                continue
            reply = domain.parse_action(str(value.get("text", "")))
            closeness, kind = classify(
                domain, task, draft, f["record_a_minus"].strip(), f["record_a_plus"].strip(), reply
            )
            counts[closeness][kind] += 1
    total = sum(sum(c.values()) for c in counts.values())
    if total == 0:
        raise CalibrationError(
            f"{cfg.llm_cache} holds no usable REVISE_WITH_RECORD entry for domain {domain.name!r} "
            f"(skipped: {dict(skipped) or 'none found'}); run the env or the protocol with this cache first"
        )
    default = get_domain(domain.name).error_model().revision
    min_count = int(getattr(cfg, "min_count", MIN_COUNT))
    fitted, kept = rates_from_counts(counts, default, min_count)
    evidence = rate_evidence(counts)
    if len(kept) == len(PLAN):
        thin = ", ".join(f"{r} (n={evidence[r]['n']})" for r in kept)
        raise CalibrationError(
            f"{cfg.llm_cache}: {total} classified revision(s) for domain {domain.name!r}, too few to fit any "
            f"rate (each needs >= {min_count} entries in its closeness bin, --min-count): {thin}; no rates "
            "file written. Run more decisions with this cache, or lower --min-count knowingly"
        )
    path = save_revision_rates(
        cfg.rates_path(),
        {domain.name: fitted},
        source=f"cm-gym calibrate --llm-cache {cfg.llm_cache}: classified REVISE_WITH_RECORD replies",
        counts={b: dict(c) for b, c in counts.items()},
        kept_defaults=kept,
        min_count=min_count,
        evidence=evidence,
    )
    return {
        "mode": "llm_cache",
        "config": {"benchmark": cfg.benchmark, "llm_cache": str(cfg.llm_cache)},
        "domain": domain.name,
        "entries": total,
        "counts": {b: dict(c) for b, c in counts.items()},
        "skipped": dict(skipped),
        "default_rates": default.as_dict(),
        "fitted_rates": fitted.as_dict(),
        "kept_defaults": kept,
        "min_count": min_count,
        "evidence": evidence,
        "rates_file": str(path),
        "seconds": time.perf_counter() - started,
    }


def cache_table(result: dict[str, Any]) -> str:
    """Counts per closeness bin and class, and the fitted rates."""
    lines = [
        f"calibrate {result['config']['benchmark']} from {result['config']['llm_cache']}: "
        f"{result['entries']} classified revisions (domain {result['domain']})",
        "",
        f"{'closeness':<10} " + " ".join(f"{c:>11}" for c in CLASSES) + "      n",
    ]
    for bin_, c in result["counts"].items():
        n = sum(c.values())
        lines.append(f"{bin_:<10} " + " ".join(f"{c.get(k, 0):>11}" for k in CLASSES) + f"  {n:5d}")
    if result["skipped"]:
        lines.append("skipped: " + ", ".join(f"{k}: {v}" for k, v in result["skipped"].items()))
    min_count = result.get("min_count", 1)
    lines += ["", f"{'rate':<18} {'k / n':>9} {'share':>6} {'95% CI':>15} {'written':>8}  default"]
    for rate, ev in result.get("evidence", {}).items():
        share = f"{ev['share']:.3f}" if ev["share"] is not None else "—"
        ci = f"[{ev['ci95'][0]:.2f}, {ev['ci95'][1]:.2f}]"
        written = f"{result['fitted_rates'][rate]:.3f}" if rate not in result["kept_defaults"] else "default"
        lines.append(
            f"{rate:<18} {ev['k']:>4} / {ev['n']:<3} {share:>6} {ci:>15} {written:>8}  "
            f"{result['default_rates'][rate]:.3f}"
        )
    if result["kept_defaults"]:
        thin = ", ".join(f"{r} (n={result['evidence'][r]['n']})" for r in result["kept_defaults"])
        lines.append(f"too few entries (< {min_count}, --min-count) to fit {thin}: defaults kept")
    lines.append(f"written to {result['rates_file']} (load with --revision-rates)")
    return "\n".join(lines)
