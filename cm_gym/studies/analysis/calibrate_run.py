"""`cm-gym calibrate`: print the simulator's revision rates next to the paper's, fit them, or fit
them to a cached run of a real model (`calibrate_cache`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cm_gym.domains.base import RevisionRates
from cm_gym.studies.analysis.calibrate import CONTEXT, SETTINGS, closeness_shares, collect, compare, fit

logger = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]


@dataclass
class CalibrateConfig:
    """Settings of one calibration (sizes default to the benchmark's full split)."""

    benchmark: str = "SQL"
    out_dir: Path | None = None
    store: Path | None = None
    revision_rates: Path | None = None
    fit: bool = False
    out: Path | None = None
    llm_cache: Path | None = None
    #: entries a closeness bin needs before `--llm-cache` fits its rates (`calibrate_cache.MIN_COUNT`)
    min_count: int = 20
    n_build: int | None = None
    n_tasks: int | None = None
    n_eval: int | None = None
    llm_seed: int = 0
    agent: str = "react"
    max_decisions: int = 3
    rescued_broken: bool = True
    progress: bool = True

    def output_dir(self) -> Path:
        return Path(self.out_dir) if self.out_dir is not None else Path("runs") / self.benchmark / "calibrate"

    def rates_path(self) -> Path:
        return Path(self.out) if self.out is not None else self.output_dir() / "revision_rates.json"


def _protocol_config(cfg: CalibrateConfig, rates: Path | None) -> Any:
    from cm_gym.protocol import ProtocolConfig

    return ProtocolConfig(
        benchmark=cfg.benchmark,
        out_dir=cfg.output_dir(),
        seeds=(0,),
        agent=cfg.agent,
        llm_seed=cfg.llm_seed,
        revision_rates=rates,
        max_decisions=cfg.max_decisions,
        store=cfg.store,
        n_build=cfg.n_build,
        n_train=cfg.n_tasks,
        n_eval=cfg.n_eval,
        tensorboard=False,
        progress=False,
    )


def _rescued_broken(pcfg: Any, snapshot: Any, prepared: Any) -> dict[str, Any]:
    """Top-1 against always-skip on T_eval (paired, Appendix E.3), scaled to 120 tasks."""
    from cm_gym.agents.baselines import AlwaysSkip, TopOne
    from cm_gym.envs.metrics import paired
    from cm_gym.protocol import make_env
    from cm_gym.protocol.training import run_episodes

    ids = list(prepared.split.eval)
    env = make_env(pcfg, snapshot, ids, task_order="sequential")
    try:
        pair = paired(run_episodes(env, AlwaysSkip(), ids), run_episodes(env, TopOne(), ids))
    finally:
        env.close()
    scale = 120.0 / max(1, pair["n_pairs"])
    return {
        "n_pairs": pair["n_pairs"],
        "rescued": pair["rescued"],
        "broken": pair["broken"],
        "net_per_120": pair["net"] * scale,
        "rescued_per_120": pair["rescued"] * scale,
        "broken_per_120": pair["broken"] * scale,
    }


def run_calibration(cfg: CalibrateConfig, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Measure (and with ``fit``, fit) the revision rates of `cfg.benchmark`'s domain."""
    if cfg.llm_cache is not None:
        from cm_gym.studies.analysis.calibrate_cache import fit_from_cache

        return fit_from_cache(cfg)
    from cm_gym.domains.registry import get_domain
    from cm_gym.llm.revision import save_revision_rates
    from cm_gym.protocol import build_snapshot, load_snapshot, make_env, prepare

    started = time.perf_counter()
    pcfg = _protocol_config(cfg, cfg.revision_rates)
    out = cfg.output_dir()
    out.mkdir(parents=True, exist_ok=True)
    prepared = prepare(pcfg)
    domain = get_domain(prepared.spec.domain_name)
    note = (lambda phase: lambda i, n: progress(phase, i, n)) if progress else (lambda phase: None)
    snapshot_path = Path(cfg.store) if cfg.store else build_snapshot(pcfg, prepared, progress=note("build"))
    snapshot = load_snapshot(snapshot_path, prepared)
    ids = list(prepared.split.train)
    rows = []
    current: RevisionRates | None = None
    for setting, overrides in SETTINGS.items():
        env = make_env(pcfg, snapshot, ids, task_order="sequential", **overrides)
        current = current or env.unwrapped.llm.revision_rates(domain.name)
        done = [0]

        def tick(k: int, phase: str = setting, done: list[int] = done) -> None:
            done[0] += k
            if progress:
                progress(phase, done[0], len(ids))

        try:
            rows += collect(env, ids, setting, prepared.tasks, progress=tick)
        finally:
            env.close()
    assert current is not None
    result: dict[str, Any] = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "domain": domain.name,
        "tasks": len(ids),
        "records": len(snapshot.records),
        "rows": len(rows),
        "closeness": closeness_shares(rows),
        "current_rates": current.as_dict(),
        "current": compare(rows, current),
        "context": list(CONTEXT),
    }
    if cfg.rescued_broken:
        result["rescued_broken_current"] = _rescued_broken(pcfg, snapshot, prepared)
    if cfg.fit:
        fitted = fit(rows, prior=current)
        path = save_revision_rates(
            cfg.rates_path(),
            {domain.name: fitted},
            source=f"cm-gym calibrate --fit --benchmark {cfg.benchmark}: least squares to the paper's "
            "Fig. 4d and Appendix E.3 rates",
            benchmark=cfg.benchmark,
            tasks=len(ids),
        )
        result.update(fitted_rates=fitted.as_dict(), fitted=compare(rows, fitted), rates_file=str(path))
        if cfg.rescued_broken:
            refit = _protocol_config(cfg, path)
            result["rescued_broken_fitted"] = _rescued_broken(refit, snapshot, prepared)
    result["seconds"] = time.perf_counter() - started
    (out / "calibrate.json").write_text(json.dumps(result, indent=2, default=str))
    (out / "calibrate_rows.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows]))
    return result


def _fmt(v: float | None) -> str:
    return "   —  " if v is None else f"{v:6.3f}"


def calibration_table(result: dict[str, Any]) -> str:
    """The paper's rates next to the simulator's (current and, after ``--fit``, fitted)."""
    if result.get("mode") == "llm_cache":
        from cm_gym.studies.analysis.calibrate_cache import cache_table

        return cache_table(result)
    fitted = result.get("fitted")
    head = (
        f"{'rate':<32} {'paper':>6}  {'sim':>6}" + (f"  {'fitted':>6}" if fitted else "") + "   n     source"
    )
    lines = [
        f"calibrate {result['config']['benchmark']} (domain {result['domain']}): {result['tasks']} T_train "
        f"tasks, {result['records']} records, {result['rows']} retrieved-record rows",
        "",
        head,
        "-" * len(head),
    ]
    for i, row in enumerate(result["current"]):
        cells = f"{row['target']:<32} {row['paper']:6.3f}  {_fmt(row['simulator'])}"
        if fitted:
            cells += f"  {_fmt(fitted[i]['simulator'])}"
        lines.append(f"{cells}  {row['n']:5d}  {row['source']}, per {row['per']}")
    lines += ["", "closeness of retrieved records to the draft (share of rows)"]
    for setting, shares in result["closeness"].items():
        lines.append(f"  {setting:<13} " + "  ".join(f"{k} {v:.2f}" for k, v in shares.items()))
    lines += ["", "revision rates: " + ", ".join(f"{k} {v:.3f}" for k, v in result["current_rates"].items())]
    if fitted:
        lines.append(
            "fitted rates:   " + ", ".join(f"{k} {v:.3f}" for k, v in result["fitted_rates"].items())
        )
        lines.append(f"written to {result['rates_file']}")
    for key, label in (("rescued_broken_current", "current"), ("rescued_broken_fitted", "fitted")):
        rb = result.get(key)
        if rb:
            lines.append(
                f"top-1 vs skip on {rb['n_pairs']} T_eval tasks ({label} rates): rescued {rb['rescued']}, "
                f"broken {rb['broken']}; per 120 tasks net {rb['net_per_120']:+.1f} "
                f"({rb['rescued_per_120']:.1f} rescued, {rb['broken_per_120']:.1f} broken)"
            )
    lines += ["", "for context (not fitted):"] + [f"  {c}" for c in result["context"]]
    return "\n".join(lines)
