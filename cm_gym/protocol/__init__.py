"""The paper's protocol (Appendix C.3): build → freeze → train → evaluate.

T_build ∪ T_train must be disjoint from T_eval (Eq. 14); this is checked before memory is frozen
and again against the source tasks of a reused snapshot. The store is frozen before the selector is
trained; evaluation opens it read-only and feeds nothing back.

One module per step: `config` (names, `ProtocolConfig`, JSON), `stores` (split, LLM, memory,
snapshot, env), `selector` (training), `evaluate` (policies on T_eval) and `run` (the entry points).
Every public name is importable from ``cm_gym.protocol`` itself.
"""

from cm_gym.protocol.config import (
    ALGOS,
    CI_BASELINES,
    KNOWN_POLICIES,
    LEARNED_POLICIES,
    POLICIES,
    POLICY_LABELS,
    ProtocolConfig,
    ProtocolError,
    config_json,
    jsonable,
    policy_label,
    selector_name,
    with_overrides,
)
from cm_gym.protocol.evaluate import (
    Checkpoints,
    checkpoints_by_layout,
    evaluate_policies,
    make_policy,
    resolve_policy,
)
from cm_gym.protocol.run import evaluate_all, run_protocol, train_all
from cm_gym.protocol.selector import train_layouts, train_selector
from cm_gym.protocol.stores import (
    Prepared,
    build_snapshot,
    check_snapshot,
    llm_stats,
    load_snapshot,
    make_env,
    make_protocol_llm,
    prepare,
)

__all__ = [
    "ALGOS",
    "CI_BASELINES",
    "KNOWN_POLICIES",
    "LEARNED_POLICIES",
    "POLICIES",
    "POLICY_LABELS",
    "Checkpoints",
    "Prepared",
    "ProtocolConfig",
    "ProtocolError",
    "build_snapshot",
    "check_snapshot",
    "checkpoints_by_layout",
    "config_json",
    "evaluate_all",
    "evaluate_policies",
    "jsonable",
    "llm_stats",
    "load_snapshot",
    "make_env",
    "make_policy",
    "make_protocol_llm",
    "policy_label",
    "prepare",
    "resolve_policy",
    "run_protocol",
    "selector_name",
    "train_all",
    "train_layouts",
    "train_selector",
    "with_overrides",
]
