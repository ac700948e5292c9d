"""Every experiment of the paper one command away (`cm-gym experiment NAME`).

Each study is one module (`table1`, `accumulation`, `retention`, `transfer`, `ablations`,
`budget`, `rescue`) with ``run(study) -> Report``; all of them plan units of work through one
`Planner` and execute them through one `Runner` (`runner.py`), which caches every unit by its
configuration and runs independent units in parallel through a `Backend`. Reports (Markdown,
JSON, PNG) land in ``<results>/reports/<name>/``; units in ``<results>/units/``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from pathlib import Path

from cm_gym.studies.experiments.config import FULL, QUICK, ExperimentConfig, Sizes
from cm_gym.studies.experiments.reporting import Report
from cm_gym.studies.experiments.runner import Backend, ExperimentError, Runner, make_backend

logger = logging.getLogger(__name__)

#: Study names, in the order ``all`` runs them (shared units are computed once).
STUDIES = ("table1", "accumulation", "retention", "transfer", "ablations", "budget", "rescue")
#: Studies beyond the paper (App. A's future work), run by name only, never by ``all``:
#: stale records after environment changes, and two records at one decision.
EXTRA_STUDIES = ("staleness", "combine")

__all__ = [
    "FULL",
    "QUICK",
    "EXTRA_STUDIES",
    "STUDIES",
    "ExperimentConfig",
    "ExperimentError",
    "Report",
    "Runner",
    "Sizes",
    "run_experiments",
]


def run_experiments(
    names: Sequence[str], cfg: ExperimentConfig, backend: Backend | None = None
) -> dict[str, tuple[Report, Path]]:
    """Run the named studies ("all" = every one) and write their reports; returns
    name → (report, path of report.md)."""
    from cm_gym.studies.experiments.common import Study

    wanted = list(STUDIES) if "all" in names else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in STUDIES + EXTRA_STUDIES]
    if unknown:
        raise ExperimentError(
            f"unknown experiment(s) {unknown}; choose from: all, {', '.join(STUDIES + EXTRA_STUDIES)}"
        )
    runner = Runner(
        cfg.results_dir, backend or make_backend(cfg.workers, cfg.backend, cfg.address), progress=cfg.progress
    )
    out: dict[str, tuple[Report, Path]] = {}
    try:
        for name in wanted:
            module = importlib.import_module(f"cm_gym.studies.experiments.{name}")
            study = Study(name, cfg, runner)
            report = module.run(study)
            md, _ = report.write(study.out_dir)
            logger.info("%s: %s", name, md)
            out[name] = (report, md)
    finally:
        runner.close()
    return out
