"""MemQ: MemRL's choice with TD(λ) credit over record provenance (issue 34).

Source: MemQ (Liao et al., "Integrating Q-Learning into Self-Evolving Memory Agents over
Provenance DAGs", arXiv 2605.08374 v3, 14 May 2026; code github.com/jwliao-ai/MemQ, mirrored as
SII-MemQ/MemQ). Neither repository could be read here (no snapshot, no indexed file, no commit to
cite); the rule is taken from the paper's abstract (arxiv.org/abs/2605.08374), the repository
README (its "Algorithm" and "Key Features") and a public reading of the paper's PDF that quotes
its update equations and §5.3 sweeps (found through the code index; the index does not name its
repository). No code is copied. The rule:

1. *Choice*: MemRL's two-phase retrieval ("locality filtering followed by Q-guided ε-greedy
   selection", README; score w_s·sim + w_q·Q), reused unchanged from `cm_gym.agents.memrl.MemRL`.
2. *Provenance DAG*: an edge from each new memory to the memories retrieved when it was created.
3. *Update* when task j ends with reward R: for each record m₀ used, the TD error
   δ = R + γ·Q(m_new) − Q(m₀); then every m reached from m₀ by a breadth-first walk up the DAG
   at shortest depth d (m₀ itself at d = 0) gets ΔQ(m) += α·(γλ)^d·δ; the summed ΔQ are
   applied after the walk. Credit decays as (γλ)^d with structural depth, not time (abstract).

Constants and where they come from:

- ``GAMMA = 0.5`` and ``TRACE_LAMBDA = 0.3``: the paper's default γ and λ could not be read.
  These are §5.3's best values on LiveCodeBench (single-turn tasks, the nearest to cm_gym's
  one-episode decisions: γ ≈ 0.5 peaks, λ = 0.3 best, λ = 0.9 worst), per that reading of the
  PDF; deep multi-turn chains (BFCL) preferred γ in [0.8, 1.0]. MemRL's γ = 0 is not taken: it
  would switch propagation off and make MemQ MemRL.
- ``MAX_DEPTH = None``: the paper costs the walk O(|A_j|·D) for a DAG depth D; whether the code
  caps the depth could not be read; no cap.
- Not found for MemQ, so MemRL's values, named as such (`cm_gym.agents.memrl`): ``ALPHA = 0.3``,
  ``EPSILON = 0.1``, ``DELTA = 0.38`` (the locality threshold θ_sim), ``K1 = 10``, ``K2 = 5``,
  ``LAMBDA = 0.5`` (w_q = w_s), ``Q_INIT = 0.0``, ``Q_MIN = -0.8``, rewards +1 / −1.

Adaptation to cm_gym (besides MemRL's, see its module):

- The DAG's edges are what cm_gym's store keeps: a repaired record names the record it
  `replaces` (`cm-gym memory reverify`), passed on by ``decision_context()["records"]``. Building
  a record does not note which records were shown while it was formed (construction updates the
  shown record's u, but the new record carries no link), so there are no other edges; extra ones
  can be given as ``provenance={record_id: parent_ids}``. Edges are learned from every training
  context; an ancestor's own parents are known once it has appeared in one (or via `provenance`).
- The store is frozen while training, so no m_new is created and the bootstrap term is absent:
  δ = R − Q(m₀) (the paper's value too for a fresh m_new at Q_INIT = 0).
- **On a store without links MemQ is MemRL**: every record used gets Q ← Q + α(R − Q) and no
  other record is touched. cm_gym's default stores have none (the default SQL store: 50 records,
  0 with a `replaces` link). On a re-verified store the record a repair replaces is retired from
  retrieval: credit reaches it (``stats()`` counts it) but changes no later choice, and it never
  appears in a context, so its own `replaces` (a chain of repeated repairs) is not learned.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from cm_gym.agents import memrl
from cm_gym.agents.memrl import MemRL
from cm_gym.envs.features import VALIDITY_INDICES

GAMMA = 0.5
TRACE_LAMBDA = 0.3
MAX_DEPTH: int | None = None
# not found for MemQ: MemRL's values
ALPHA = memrl.ALPHA
EPSILON = memrl.EPSILON
DELTA = memrl.DELTA
K1 = memrl.K1
K2 = memrl.K2
LAMBDA = memrl.LAMBDA
Q_INIT = memrl.Q_INIT
Q_MIN = memrl.Q_MIN
SUCCESS_REWARD = memrl.SUCCESS_REWARD
FAILURE_REWARD = memrl.FAILURE_REWARD


class MemQ(MemRL):
    """MemRL's per-record Q and two-phase choice; the update sends (γλ)^d of each used record's
    TD error to its provenance ancestors (see the module doc)."""

    name = "memq"

    def __init__(
        self,
        env: Any = None,
        seed: int = 0,
        validity_indices: Sequence[int] = VALIDITY_INDICES,
        *,
        gamma: float = GAMMA,
        trace_lambda: float = TRACE_LAMBDA,
        max_depth: int | None = MAX_DEPTH,
        provenance: Mapping[str, Iterable[str]] | None = None,
        **memrl_kwargs: Any,
    ) -> None:
        super().__init__(env, seed, validity_indices, **memrl_kwargs)
        self.gamma, self.trace_lambda, self.max_depth = float(gamma), float(trace_lambda), max_depth
        #: the provenance DAG: record id -> the records it was derived from
        self.parents: dict[str, set[str]] = {}
        for child, parents in (provenance or {}).items():
            for parent in parents:
                self.add_edge(child, parent)
        self.ancestor_updates = 0  # updates an ancestor got from a descendant's use (d ≥ 1)
        self.ancestor_credits: dict[str, int] = {}

    def add_edge(self, child: str, parent: str) -> None:
        """Record that `child` was derived from `parent` (no self-loops)."""
        if child and parent and child != parent:
            self.parents.setdefault(child, set()).add(parent)

    def ancestry(self, record_id: str) -> list[tuple[str, int]]:
        """The record (depth 0) and every ancestor with its shortest depth, breadth first."""
        depth = {record_id: 0}
        queue = deque([record_id])
        while queue:
            node = queue.popleft()
            if self.max_depth is not None and depth[node] >= self.max_depth:
                continue
            for parent in sorted(self.parents.get(node, ())):
                if parent not in depth:
                    depth[parent] = depth[node] + 1
                    queue.append(parent)
        return list(depth.items())

    def observe(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        info: dict[str, Any],
        context: dict[str, Any] | None,
    ) -> None:
        for record in (context or {}).get("records", ()):
            self.add_edge(record.get("record_id", ""), record.get("replaces", ""))
        super().observe(obs, action, reward, info, context)

    def end_episode(self, info: dict[str, Any]) -> None:
        r = SUCCESS_REWARD if info.get("solved") else FAILURE_REWARD
        used = list(dict.fromkeys(self._used))  # each record used in the task, once
        delta_q: dict[str, float] = {}
        decay = self.gamma * self.trace_lambda
        for m0 in used:
            td_error = r - self.value(m0)  # R + γ·Q(m_new) − Q(m₀) with no m_new (frozen store)
            for m, d in self.ancestry(m0):
                delta_q[m] = delta_q.get(m, 0.0) + self.alpha * decay**d * td_error
                if d > 0:
                    self.ancestor_updates += 1
                    self.ancestor_credits[m] = self.ancestor_credits.get(m, 0) + 1
        for m, dq in delta_q.items():
            self.q[m] = self.value(m) + dq
        for m0 in used:
            self.visits[m0] = self.visits.get(m0, 0) + 1
        self._used = []

    def stats(self) -> dict[str, Any]:
        """MemRL's statistics plus the provenance credit: edges known, ancestor updates (how often
        credit reached a record it had not been used for) and the distinct ancestors credited."""
        out = super().stats()
        out["exploration"] = {**out["exploration"], "gamma": self.gamma, "trace_lambda": self.trace_lambda}
        out.update(
            provenance_edges=sum(len(p) for p in self.parents.values()),
            credit_propagated=self.ancestor_updates,
            ancestors_credited=len(self.ancestor_credits),
            ancestor_credits=dict(sorted(self.ancestor_credits.items())),
        )
        return out
