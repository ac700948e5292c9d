"""Pooled calibration of the simulated revision: one set of `RevisionRates` fitted to the paper's
Fig. 4d / Appendix E.3 rates over several benchmarks at once, each weighted equally.

    cm-gym calibrate --benchmark SQL --fit --out-dir runs/cal/SQL     # and SAT, SMT, Code ...
    python bench/bench_calibration.py runs/cal/SQL runs/cal/SAT runs/cal/SMT runs/cal/Code

Reads each folder's ``calibrate_rows.json`` (written by `cm-gym calibrate`) and prints every
target next to the pooled simulator value under the current defaults and under the pooled fit,
then the per-benchmark values under the pooled fit. `RevisionRates`' class defaults are such a
pooled fit, made when Fig. 4d was counted as what each retrieved record would do if shown (now:
changes by the shown record ÷ all retrieved, as the paper and the `ablations` study count; the
defaults were not refit): the paper reports these rates over all its domains, so one LLM behaviour
is fitted, and each domain's structure decides how often that behaviour changes or harms an action.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cm_gym.domains.base import RevisionRates
from cm_gym.studies.analysis.calibrate import PAPER_TARGETS, Row, fit_lines, linear_rate, pooled_rate


def load_rows(folder: Path) -> list[Row]:
    return [Row(**r) for r in json.loads((folder / "calibrate_rows.json").read_text())]


def main(folders: list[str]) -> int:
    names = [Path(f).name for f in folders]
    row_sets = [load_rows(Path(f)) for f in folders]
    current = RevisionRates()
    lines = [(pooled_rate(row_sets, t), t.value) for t in PAPER_TARGETS]
    fitted = fit_lines(lines, prior=current)

    def cell(v: float | None) -> str:
        return "   —  " if v is None else f"{v:6.3f}"

    print(f"pooled over {', '.join(names)} (equal weight per benchmark)")
    print(f"{'rate':<32} {'paper':>6} {'now':>6} {'fit':>6}  " + " ".join(f"{n[:6]:>6}" for n in names))
    for t, (lr, _) in zip(PAPER_TARGETS, lines, strict=True):
        per = [linear_rate(rows, t).value(fitted) if linear_rate(rows, t).n else None for rows in row_sets]
        print(
            f"{t.name:<32} {t.value:6.3f} {cell(lr.value(current))} {cell(lr.value(fitted))}  "
            + " ".join(cell(v) for v in per)
        )
    print("defaults now: " + ", ".join(f"{k} {v:.3f}" for k, v in current.as_dict().items()))
    print("pooled fit:   " + ", ".join(f"{k} {v:.3f}" for k, v in fitted.as_dict().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
