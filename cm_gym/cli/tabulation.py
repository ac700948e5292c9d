"""`cm-gym tabulate`: fill the response cache with every LLM call a protocol run can make, so that
training and evaluation against a real model replay it at simulator speed (``--llm-cache-mode ro``).

What is enumerated, for the tasks of the chosen split (train — which holds the validation subset —,
eval, or both):

* **construction** (unless ``--store`` names a snapshot): memory is built on T_build exactly as
  `cm-gym run` builds it, through the cache (the first drafts of all build tasks are fetched
  together; the rest of a build is sequential by nature: each task reads the memory the earlier
  ones wrote). A later run with the same options rebuilds the same memory from the cache;
* **the env**, level by level: at every reachable decision state, the memory-free draft, the
  revision with each record retrieval can return there, and (Reflexion) the reflection after each
  failed attempt. The next state depends on the reply and on the evaluator's feedback, so the tree
  is expanded one round at a time, every round's uncached calls fetched concurrently. Any policy —
  the trained selector, the baselines, the Oracle's peeks — only ever walks this tree.

Before any call, the command prints an upper bound on calls and tokens (the bill first; with
``--dry-run`` it stops there). Every reply is stored as it arrives, so a killed run resumes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.llm.base import (
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    REVISE_WITH_RECORD,
    estimate_tokens,
)
from cm_gym.llm.batch import CallProgress, FetchStats, RecordingLLM
from cm_gym.llm.cached import CachedLLM
from cm_gym.protocol import (
    Prepared,
    ProtocolConfig,
    ProtocolError,
    build_snapshot,
    load_snapshot,
    make_env,
    make_protocol_llm,
    prepare,
)

logger = logging.getLogger(__name__)

SPLITS = ("train", "eval", "all")
DEFAULT_COMPLETION_CAP = 1024  # completion tokens per call when the backend states no cap


def max_prompt_chars(template: str) -> int:
    """The longest prompt `template` can render: every field at its truncation limit."""
    from cm_gym.llm.fields import field_limit
    from cm_gym.llm.prompts import CHAT_TEMPLATES, render

    fields = {name: "x" * field_limit(name) for name in CHAT_TEMPLATES[template].field_names}
    return len(render(template, fields).joined())


@dataclass(frozen=True)
class Bill:
    """An upper bound on the calls and tokens of a tabulation, computed before any call."""

    build_calls: int
    env_calls: int
    tokens: int
    completion_cap: int

    @property
    def calls(self) -> int:
        return self.build_calls + self.env_calls

    def format(self) -> str:
        return (
            f"bill (upper bound, before any call): at most {self.calls:,} calls ({self.build_calls:,} to "
            f"build memory, {self.env_calls:,} for the env) and {self.tokens / 1e6:,.1f} M tokens (every "
            f"prompt at its field limits, 4 characters a token, {self.completion_cap} completion tokens a call)"
        )


def bill_bound(cfg: ProtocolConfig, n_build: int, n_env_tasks: int, completion_cap: int) -> Bill:
    """Upper bound: per env task, every action sequence of the decision tree; per build task, every
    decision drafted, revised and reflected on, and every expansion's alternatives and distillations."""
    from cm_gym.memory.construction import ConstructionConfig

    prompt = {t: estimate_tokens("x" * max_prompt_chars(t)) + completion_cap for t in _TEMPLATES}
    reflexion = cfg.agent == "reflexion"
    max_calls = cfg.env_kwargs.get("max_evaluator_calls") or cfg.max_decisions
    depth = min(cfg.max_decisions, int(max_calls))
    k = 0 if cfg.retrieval == "none" else cfg.k
    states = sum((1 + k) ** d for d in range(depth))
    per_state = {DRAFT_ACTION: 1, REVISE_WITH_RECORD: k, REFLECT: (1 + k) if reflexion else 0}
    env_calls = n_env_tasks * states * sum(per_state.values())
    env_tokens = n_env_tasks * states * sum(n * prompt[t] for t, n in per_state.items())
    build = ConstructionConfig(retention=cfg.retention)
    per_build = {
        DRAFT_ACTION: depth,
        REVISE_WITH_RECORD: depth if build.reuse_policy == "top1" else 0,
        REFLECT: depth if reflexion else 0,
        GENERATE_LOCAL_ALTERNATIVES: build.max_expansions,
        DISTIL_RECORD: build.max_expansions * build.K,
    }
    build_calls = n_build * sum(per_build.values())
    build_tokens = n_build * sum(n * prompt[t] for t, n in per_build.items())
    return Bill(build_calls, env_calls, env_tokens + build_tokens, completion_cap)


_TEMPLATES = (DRAFT_ACTION, REVISE_WITH_RECORD, REFLECT, GENERATE_LOCAL_ALTERNATIVES, DISTIL_RECORD)


@dataclass
class TabulateReport:
    """What a tabulation did (calls and tokens are live calls: what it cost)."""

    bill: Bill
    cache: str
    env_tasks: int
    build: FetchStats = field(default_factory=FetchStats)
    env: FetchStats = field(default_factory=FetchStats)
    states: int = 0
    snapshot: str = ""
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        return self.build.calls + self.env.calls

    @property
    def tokens(self) -> int:
        return self.build.tokens + self.env.tokens


def _env_task_ids(prepared: Prepared, split: str) -> list[str]:
    if split not in SPLITS:
        raise ProtocolError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    ids = list(prepared.split.train) if split in ("train", "all") else []
    return ids + (list(prepared.split.eval) if split in ("eval", "all") else [])


def _cached_llm(cfg: ProtocolConfig, prepared: Prepared) -> CachedLLM:
    if cfg.llm_cache_mode != "rw":
        raise ProtocolError(
            f"tabulate fills the cache: it needs --llm-cache-mode rw, not {cfg.llm_cache_mode}"
        )
    llm = make_protocol_llm(cfg, prepared)
    if not isinstance(llm, CachedLLM):  # the simulator is cached only on request: request it
        from cm_gym.llm.factory import with_cache

        llm = with_cache(llm, cfg.llm_cache, "rw", concurrency=cfg.concurrency)
    assert isinstance(llm, CachedLLM)
    if not llm.cache.writable:
        raise ProtocolError(f"response cache {llm.cache.path} is not writable: tabulate needs to write it")
    return llm


def _bar(enabled: bool, desc: str, unit: str, total: int | None = None) -> Any:
    if not enabled:
        return None
    from cm_gym.core.progress import progress_bar

    return progress_bar(total, desc, unit)


def tabulate(
    cfg: ProtocolConfig,
    split: str = "all",
    *,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
) -> TabulateReport:
    """Fill the response cache for a protocol run (see the module docstring)."""
    from cm_gym.agent.prefetch import ReachableStates, drive

    started = time.perf_counter()
    prepared = prepare(cfg)
    ids = _env_task_ids(prepared, split)
    llm = _cached_llm(cfg, prepared)
    build_tasks = [] if cfg.store is not None else [prepared.tasks[i] for i in prepared.split.build]
    cap = int(getattr(llm.inner, "max_tokens", None) or DEFAULT_COMPLETION_CAP)
    report = TabulateReport(bill_bound(cfg, len(build_tasks), len(ids), cap), str(llm.cache.path), len(ids))
    echo(
        f"tabulate {cfg.benchmark} with {llm.name} into {llm.cache.path}: {len(ids)} env tasks ({split}), "
        + (f"{len(build_tasks)} build tasks" if build_tasks else f"memory from {cfg.store}")
        + f", concurrency {cfg.concurrency}"
    )
    echo(report.bill.format())
    if dry_run:
        return report
    try:
        if build_tasks:
            report.build, snapshot_path = _build(cfg, prepared, llm)
        else:
            snapshot_path = Path(cfg.store)  # type: ignore[arg-type]
        report.snapshot = str(snapshot_path)
        snapshot = load_snapshot(snapshot_path, prepared)
        env = make_env(cfg, snapshot, ids, RecordingLLM(llm), task_order="sequential")
        explorer = ReachableStates(env)
        bar = CallProgress(_bar(cfg.progress, "tabulate", "call"))
        try:
            report.env = drive(
                explorer.roots(ids), explorer.expand, llm, concurrency=cfg.concurrency, progress=bar
            )
        finally:
            bar.close()
            env.close()
        report.states = explorer.states
    finally:
        report.seconds = time.perf_counter() - started
    echo(
        f"done: {report.calls:,} calls made ({report.tokens:,} tokens; {report.build.calls:,} for the build), "
        f"{report.states:,} decision states, {report.seconds:.1f} s; the cache holds {len(llm.cache):,} replies"
    )
    where = f" --llm-cache {cfg.llm_cache}" if cfg.llm_cache else ""
    echo(f"replay with: cm-gym run --llm {cfg.llm}{where} --llm-cache-mode ro and the same options")
    llm.cache.close()
    return report


def _build(cfg: ProtocolConfig, prepared: Prepared, llm: CachedLLM) -> tuple[FetchStats, Path]:
    """Construction through the cache, as `cm-gym run` does it; returns its live calls."""
    calls, prompt, completion = llm.live_calls, llm.live_prompt_tokens, llm.live_completion_tokens
    t0 = time.perf_counter()
    bar = _bar(cfg.progress, "build", "task", total=len(prepared.split.build))

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.n = done
            bar.refresh()

    try:
        path = build_snapshot(cfg, prepared, progress=progress, llm=llm)
    finally:
        if bar is not None:
            bar.close()
    stats = FetchStats(
        calls=llm.live_calls - calls,
        prompt_tokens=llm.live_prompt_tokens - prompt,
        completion_tokens=llm.live_completion_tokens - completion,
        seconds=time.perf_counter() - t0,
    )
    return stats, path
