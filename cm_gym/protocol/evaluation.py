"""Your own policy in the results table: the same protocol, episodes and metrics as the built-ins.

A *policy source* is any of:

- an object with SB3's ``predict(observation, state=None, episode_start=None, deterministic=True)``
  (a trained SB3 / sb3-contrib model, a baseline, your class) — used as is for every seed;
- a factory ``make_policy(env, seed)`` returning one (either argument may be left out of its
  signature) — called once per selector seed, on the evaluation env;
- on the command line, ``[NAME=]package.module:attribute`` naming either of the above.

A policy whose ``predict`` takes ``action_masks`` (MaskablePPO) receives the env's mask. A policy
that picks a masked action gets the env's documented lenient skip, and the count is reported
(``masked_actions``) with a loud warning; ``on_masked="error"`` refuses instead.

`evaluate_policies({"name": policy, ...}, benchmark="SQL", store=...)` is the Python entry; ``cm-gym
evaluate --policy NAME=pkg.mod:make_policy`` the command-line one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cm_gym.core.progress import PhaseBar
from cm_gym.core.quick import PROTOCOL_SIZES, quick_mode, say
from cm_gym.protocol.config import KNOWN_POLICIES, ProtocolConfig, ProtocolError
from cm_gym.protocol.custom import ON_MASKED, instantiate_policy, load_policy, report_masked
from cm_gym.protocol.run import evaluate_all

__all__ = ["ON_MASKED", "evaluate_policies", "instantiate_policy", "load_policy", "report_masked"]


def evaluate_policies(
    policies: Mapping[str, Any],
    *,
    benchmark: str = "SQL",
    store: str | Path | None = None,
    baselines: Sequence[str] = ("none",),
    seeds: Sequence[int] = (0,),
    n_eval: int | None = None,
    split_seed: int = 12345,
    on_masked: str = "warn",
    out_dir: str | Path | None = None,
    **env_kwargs: Any,
) -> dict[str, Any]:
    """Evaluate your policies (and the built-in `baselines`) on the benchmark's held-out tasks,
    with the store and the policies frozen, exactly as `cm-gym evaluate` does. `store` is a frozen
    snapshot (default: the benchmark's default store); `env_kwargs` go to the env (``k``,
    ``max_decisions``, ``agent``, ...). Returns the results dict (``results["policies"][name]``);
    `cm_gym.protocol.report.results_table(results)` prints it. With `out_dir`, ``results.json`` is written
    there. Progress goes to stderr as `cm-gym evaluate` shows it (a bar on a terminal, a line per
    tenth of the policy × seed runs otherwise); ``progress=False`` or ``CM_GYM_PROGRESS=0`` hides it."""
    if on_masked not in ON_MASKED:
        raise ProtocolError(f"on_masked must be one of {ON_MASKED}, got {on_masked!r}")
    clash = sorted(set(policies) & set(KNOWN_POLICIES))
    if clash:
        raise ProtocolError(
            f"policy name(s) {clash} are built-in: choose other names (built-ins go in baselines=)"
        )
    unknown = sorted(set(baselines) - set(KNOWN_POLICIES) - {"cf_memory"})
    if unknown or "cf_memory" in baselines:
        raise ProtocolError(
            f"baselines must be among {[p for p in KNOWN_POLICIES if p != 'cf_memory']}, got {list(baselines)}"
        )
    if store is None:
        from cm_gym.memory.defaults import default_snapshot

        store = default_snapshot(benchmark)
    if n_eval is None and quick_mode():  # CM_GYM_QUICK=1: smoke sizes (`cm_gym.core.quick`)
        say("evaluate_policies")
        n_eval = PROTOCOL_SIZES["n_eval"]
    known = {f.name for f in ProtocolConfig.__dataclass_fields__.values()}  # type: ignore[attr-defined]
    protocol_kw = {k: env_kwargs.pop(k) for k in list(env_kwargs) if k in known}
    cfg = ProtocolConfig(
        benchmark=benchmark,
        store=Path(store),
        seeds=tuple(int(s) for s in seeds),
        n_eval=n_eval,
        split_seed=split_seed,
        policies=(*baselines, *policies),
        custom_policies=dict(policies),
        on_masked=on_masked,
        out_dir=Path(out_dir) if out_dir is not None else Path("runs") / benchmark,
        env_kwargs=env_kwargs,
        **protocol_kw,
    )
    bar = PhaseBar(cfg.progress)  # "evaluate: 3/8 run (38%), 0:41 elapsed, ~1:08 left" on stderr
    try:
        return evaluate_all(cfg, {}, write=out_dir is not None, progress=bar)
    finally:
        bar.close()
