"""Text tables of real-vs-simulated error comparisons (`cm_gym.studies.analysis.real_errors_compare.compare`):
the kind distribution side by side, and one summary line per (domain, system)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cm_gym.studies.analysis.real_errors import ErrorSample, distance


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}"


def _aligned(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.rjust(widths[i]) if i else c.ljust(widths[i]) for i, c in enumerate(r)) for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def kinds_table(samples: Sequence[ErrorSample]) -> str:
    """One row per kind (of the first sample's taxonomy, then any other kind seen): each
    sample's share of failure mass (%; every failure spreads 1 over its kinds), then failures,
    the memory-free score, the local share and the one-edit-repairable share (checked count)."""
    kinds = list(samples[0].taxonomy)
    for s in samples:
        kinds += [k for k in s.mass() if k not in kinds]
    rows = [["kind (% of failure mass)", *[s.source for s in samples]]]
    dists = [s.distribution() for s in samples]
    for k in kinds:
        if any(d.get(k, 0.0) > 0 for d in dists):
            rows.append([k, *[_pct(d.get(k, 0.0)) for d in dists]])
    rows.append(["failures / answers", *[f"{len(s.failures)}/{s.n_tasks}" for s in samples]])
    rows.append(
        [
            "None score (first answer)",
            *[f"{s.none_score:.1f}" if s.none_score is not None else "—" for s in samples],
        ]
    )
    rows.append(["one local edit from gold %", *[_pct(s.local_share) for s in samples]])
    rows.append(
        [
            "one grammar edit repairs %",
            *[f"{_pct(s.repairable_share)} (n={s.repair_checked})" for s in samples],
        ]
    )
    return _aligned(rows)


def summary_row(
    kind: str, system: str, real: ErrorSample, default: ErrorSample, fitted: ErrorSample | None
) -> dict[str, Any]:
    """Distances before (default) and after (fitted profile) and the scores behind them."""
    before = distance(real, default)
    after = distance(real, fitted) if fitted is not None else None
    return {
        "domain": kind,
        "system": system,
        "none_real": real.none_score,
        "none_default": default.none_score,
        "none_fitted": fitted.none_score if fitted is not None else None,
        "tv_before": before.tv,
        "tv_after": after.tv if after is not None else None,
        "repair_real": real.repairable_share,
        "repair_default": default.repairable_share,
        "repair_fitted": fitted.repairable_share if fitted is not None else None,
        "local_real": real.local_share,
        "local_default": default.local_share,
        "local_fitted": fitted.local_share if fitted is not None else None,
    }  # fmt: skip


def summary_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The per-(domain, system) summary: TV before → after, None real / default / fitted, and
    the one-edit-repairable share real / default / fitted."""
    out = [["domain", "system", "TV default", "TV fitted", "None real", "None dflt", "None fit",
            "repair real", "repair dflt", "repair fit", "local real", "local fit"]]  # fmt: skip
    for r in rows:
        num = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
        out.append([
            r["domain"], r["system"], f"{r['tv_before']:.3f}", "—" if r["tv_after"] is None else f"{r['tv_after']:.3f}",
            num(r["none_real"]), num(r["none_default"]), num(r["none_fitted"]),
            _pct(r["repair_real"]), _pct(r["repair_default"]), _pct(r["repair_fitted"]),
            _pct(r["local_real"]), _pct(r["local_fitted"]),
        ])  # fmt: skip
    return _aligned(out)
