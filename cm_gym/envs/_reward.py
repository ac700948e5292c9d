"""The decision reward of the selection env (SPEC §5), shared by `step` and the opt-in
counterfactuals (`counterfactuals=True`), so that what ``info["counterfactual"]`` says an action
would earn is computed by the very formula that pays it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def decision_reward(
    weights: Mapping[str, float], cost: Any, solved: bool, exhausted: bool
) -> tuple[float, bool]:
    """(reward, terminated) of a decision: the solve reward when it ends the episode solved, minus
    λ_w per evaluator call, λ_f per failure and λ_τ per τ0 tokens of the decision (`cost`, a
    `cm_gym.agent.Cost`: the memory-free draft's and the decision's). `exhausted`: the decision
    or call budget runs out with it."""
    terminated = bool(solved or exhausted)
    reward = (
        weights["solve"] * float(terminated and solved)
        - weights["calls"] * cost.evaluator_calls
        - weights["failures"] * cost.failures
        - weights["tokens"] * cost.tokens / weights["token_scale"]
    )
    return float(reward), terminated
