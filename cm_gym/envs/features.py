"""The selector's observation z_t (SPEC §4, paper Eq. 9): named slices of the 98 dims, the fixed
projection P and the action mask.

Layout (written down once, here; everything else refers to these names)::

    [ 0:32]  STATE   P · E(state text)            E = 512-dim char n-gram hashing, L2-normalised
    [32:64]  DRAFT   P · E(memory-free draft â_t)
    [64:92]  SLOTS   L = 4 slots × 7 features, slot j (1-based) at 64 + 7·(j−1):
                       0 relevance           cos(φ(s), φ(q)) reported by retrieval
                       1 admission score     S_adm stored with the record
                       2 estimated Δ         raw improvement from the record's evidence
                       3 reuse utility u     in [−1, 1], frozen with the snapshot
                       4 use frequency       uses / (uses + 10)  ∈ [0, 1)
                       5 helpful fraction    helpful / uses, 0 when unused
                       6 validity            1 when the slot holds a retrieved record, else 0
                     unused slots are all zero (so their validity is 0 and they are masked)
    [92:98]  BUDGET  remaining decisions / max_decisions, remaining evaluator calls / max calls,
                     failures / max_decisions, min(tokens used / token_budget, 1),
                     last attempt's score (0 before the first attempt), decision index / max_decisions

The *extended* layout (``obs_layout="extended"``, opt-in and **beyond the paper**) appends, after
the 98 dims above, two per-slot features the paper's z_t lacks, both computable by a deployed
system without the reference or an extra LLM call::

    [98:106] EXTRA   L = 4 slots × 2 features, slot j (1-based) at 98 + 2·(j−1):
                       0 applies             1 when the record's a⁻ → a⁺ edit has a site in the
                                             draft (`Domain.record_applies`), else 0
                       1 shown before        1 when the record was already used at an earlier
                                             decision of this episode, else 0
                     unused slots are zero

Everything in [0:98] — and so the validity indices (70, 77, 84, 91) — is identical in both
layouts: mask-from-observation works on either. A checkpoint refuses the other layout.

The action space is Discrete(5): 0 = skip (always valid), j = use slot j. The mask is
``[1, valid_1, …, valid_4]`` and can be read back from the observation alone
(`mask_from_observation`), so a replay buffer of observations carries it.

The opt-in *pair* action space (``action_space="pairs"``, **beyond the paper**, App. A's "combining
multiple verified records") is Discrete(17): 0 = skip, j ∈ 1..4 = slot j alone, and 5..16 = the
ordered pairs (i, j), i ≠ j, in `PAIR_SLOTS` order (LLM shown slot i's record, then slot j's). A
pair is valid when both its slots are; its mask is derived from the same validity features
(``mask_from_observation(obs, pairs=True)``), so the 98 dims stay the paper's. P is a Gaussian random
projection 512 → 32 drawn from ``np.random.default_rng(20260824)`` scaled by 1/√32; it is never
fitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np

from cm_gym.core.types import CmGymError

EMBED_DIM = 512
PROJ_DIM = 32
PROJECTION_SEED = 20260824
N_SLOTS = 4
SLOT_DIM = 7
N_BUDGET = 6
N_ACTIONS = 1 + N_SLOTS
OBS_DIM = 2 * PROJ_DIM + N_SLOTS * SLOT_DIM + N_BUDGET  # 98

#: The observation layouts: the paper's 98 dims (default) and the opt-in extended one (106).
OBS_LAYOUTS: tuple[str, ...] = ("paper", "extended")
EXTRA_SLOT_FEATURES: tuple[str, ...] = ("applies", "shown_before")
EXTRA_DIM = len(EXTRA_SLOT_FEATURES)
OBS_DIM_EXTENDED = OBS_DIM + N_SLOTS * EXTRA_DIM  # 106
EXTRA = slice(OBS_DIM, OBS_DIM_EXTENDED)

STATE = slice(0, PROJ_DIM)
DRAFT = slice(PROJ_DIM, 2 * PROJ_DIM)
SLOTS = slice(2 * PROJ_DIM, 2 * PROJ_DIM + N_SLOTS * SLOT_DIM)
BUDGET = slice(SLOTS.stop, SLOTS.stop + N_BUDGET)

SLOT_FEATURES: tuple[str, ...] = (
    "relevance",
    "admission_score",
    "delta",
    "reuse_utility",
    "use_frequency",
    "helpful_fraction",
    "validity",
)
BUDGET_FEATURES: tuple[str, ...] = (
    "remaining_decisions",
    "remaining_evaluator_calls",
    "failures",
    "tokens_used",
    "last_score",
    "decision_index",
)
VALIDITY_OFFSET = SLOT_FEATURES.index("validity")
#: Observation indices of the validity feature of slots 1..4: (70, 77, 84, 91).
VALIDITY_INDICES: tuple[int, ...] = tuple(
    SLOTS.start + SLOT_DIM * j + VALIDITY_OFFSET for j in range(N_SLOTS)
)
#: Frequency normaliser: use frequency = uses / (uses + USE_FREQUENCY_SCALE).
USE_FREQUENCY_SCALE = 10.0

assert OBS_DIM == 98 and BUDGET.stop == OBS_DIM

#: The action spaces: the paper's Discrete(5) ("single", default) and the opt-in pairs (17).
ACTION_SPACES: tuple[str, ...] = ("single", "pairs")
#: Ordered slot pairs of the pair action space: action 5 + n is PAIR_SLOTS[n] (1-based slots).
PAIR_SLOTS: tuple[tuple[int, int], ...] = tuple(
    (i, j) for i in range(1, N_SLOTS + 1) for j in range(1, N_SLOTS + 1) if i != j
)
N_PAIR_ACTIONS = N_ACTIONS + len(PAIR_SLOTS)  # 17
_PAIR_FIRST = [i for i, _ in PAIR_SLOTS]  # indices into [skip, valid_1..valid_4]
_PAIR_SECOND = [j for _, j in PAIR_SLOTS]
ArrayT = TypeVar("ArrayT")


class ObservationLayoutError(CmGymError):
    """An observation, checkpoint or policy does not match the 98-dim layout it was built for."""


def obs_dim(layout: str = "paper") -> int:
    """The observation size of a layout (98 for "paper", 106 for "extended")."""
    if layout == "paper":
        return OBS_DIM
    if layout == "extended":
        return OBS_DIM_EXTENDED
    raise ObservationLayoutError(f"obs_layout must be one of {OBS_LAYOUTS}, got {layout!r}")


def layout_of(dim: int) -> str:
    """The layout name of an observation size ("paper", "extended", or a description)."""
    return {OBS_DIM: "paper", OBS_DIM_EXTENDED: "extended"}.get(int(dim), f"unknown ({dim} dims)")


def extra_slot(j: int) -> slice:
    """The extended layout's slice of slot ``j``'s extra features (1-based)."""
    if not 1 <= j <= N_SLOTS:
        raise ValueError(f"slot index must be in 1..{N_SLOTS}, got {j}")
    start = EXTRA.start + EXTRA_DIM * (j - 1)
    return slice(start, start + EXTRA_DIM)


def slot(j: int) -> slice:
    """The observation slice of slot ``j`` (1-based, as in the action space)."""
    if not 1 <= j <= N_SLOTS:
        raise ValueError(f"slot index must be in 1..{N_SLOTS}, got {j}")
    start = SLOTS.start + SLOT_DIM * (j - 1)
    return slice(start, start + SLOT_DIM)


@lru_cache(maxsize=1)
def projection() -> np.ndarray:
    """The fixed projection P (512 × 32, float32), identical in every process and run."""
    rng = np.random.default_rng(PROJECTION_SEED)
    p = rng.standard_normal((EMBED_DIM, PROJ_DIM)) / np.sqrt(PROJ_DIM)
    p = p.astype(np.float32)
    p.setflags(write=False)
    return p


def project(embeddings: np.ndarray) -> np.ndarray:
    """P · E: map (…, 512) embeddings to (…, 32) float32."""
    emb = np.asarray(embeddings, dtype=np.float32)
    if emb.shape[-1] != EMBED_DIM:
        raise ObservationLayoutError(f"expected {EMBED_DIM}-dim embeddings, got shape {emb.shape}")
    return emb @ projection()


@dataclass(frozen=True)
class SlotFeatures:
    """The seven features of one retrieved record (validity is implied: a SlotFeatures is valid)."""

    relevance: float
    admission_score: float
    delta: float
    reuse_utility: float
    uses: int
    helpful_fraction: float

    @classmethod
    def from_record(cls, record: Any, relevance: float) -> SlotFeatures:
        """Read the stored statistics of a record (duck-typed: admission_score, improvement or
        delta, u, uses, helpful_fraction) without importing the memory package. The estimated
        improvement is the record's evidence gain (``improvement``), falling back to raw Δ."""
        return cls(
            relevance=float(relevance),
            admission_score=float(record.admission_score),
            delta=float(getattr(record, "improvement", record.delta)),
            reuse_utility=float(record.u),
            uses=int(record.uses),
            helpful_fraction=float(record.helpful_fraction),
        )

    def vector(self) -> np.ndarray:
        """The 7-dim slot vector, validity = 1."""
        return np.array(self.values(), dtype=np.float32)

    def values(self) -> list[float]:
        """`vector`'s values before their float32 rounding (`build_observation` writes them)."""
        uses = max(0, self.uses)
        return [
            self.relevance,
            self.admission_score,
            self.delta,
            self.reuse_utility,
            uses / (uses + USE_FREQUENCY_SCALE),
            self.helpful_fraction if uses > 0 else 0.0,
            1.0,
        ]


@dataclass(frozen=True)
class BudgetFeatures:
    """Raw counters of the episode so far and their limits; `vector()` normalises them."""

    decision: int
    max_decisions: int
    evaluator_calls: int
    max_evaluator_calls: int
    failures: int
    tokens: int
    token_budget: int
    last_score: float

    def vector(self) -> np.ndarray:
        """The six normalised budget features, in BUDGET_FEATURES order."""
        return np.array(self.values(), dtype=np.float32)

    def values(self) -> list[float]:
        """`vector`'s values before their float32 rounding (`build_observation` writes them)."""
        md = max(1, self.max_decisions)
        mc = max(1, self.max_evaluator_calls)
        return [
            max(0, md - self.decision) / md,
            max(0, mc - self.evaluator_calls) / mc,
            self.failures / md,
            min(self.tokens / max(1, self.token_budget), 1.0),
            self.last_score,
            min(self.decision, md) / md,
        ]


@dataclass(frozen=True)
class SlotExtras:
    """The extended layout's two features of one retrieved record (beyond the paper)."""

    applies: bool
    shown_before: bool

    def vector(self) -> np.ndarray:
        return np.array(self.values(), dtype=np.float32)

    def values(self) -> list[float]:
        return [float(self.applies), float(self.shown_before)]


def build_observation(
    state_embedding: np.ndarray | None,
    draft_embedding: np.ndarray | None,
    slots: Sequence[SlotFeatures],
    budget: BudgetFeatures,
    extras: Sequence[SlotExtras] | None = None,
    layout: str = "paper",
) -> np.ndarray:
    """Assemble z_t: (98,) for the paper layout, (106,) for the extended one (then `extras` gives
    one `SlotExtras` per slot). Embeddings are 512-dim (or None → zeros); at most 4 slots."""
    if len(slots) > N_SLOTS:
        raise ObservationLayoutError(f"at most {N_SLOTS} slots fit the observation, got {len(slots)}")
    dim = obs_dim(layout)
    extras = list(extras or [])
    if layout == "extended" and len(extras) != len(slots):
        raise ObservationLayoutError(f"the extended layout needs one SlotExtras per slot, got {len(extras)}")
    obs = np.zeros(dim, dtype=np.float32)
    if state_embedding is not None:
        obs[STATE] = project(state_embedding)
    if draft_embedding is not None:
        obs[DRAFT] = project(draft_embedding)
    # the slots' and the budget's values written as one list each (each value rounded to float32
    # as its `vector` rounds it): one conversion, not one small array per slot
    if slots:
        obs[SLOTS.start : SLOTS.start + SLOT_DIM * len(slots)] = [v for f in slots for v in f.values()]
    obs[BUDGET] = budget.values()
    if layout == "extended" and extras:
        obs[EXTRA.start : EXTRA.start + EXTRA_DIM * len(extras)] = [v for e in extras for v in e.values()]
    return obs


def n_actions(action_space: str = "single") -> int:
    """The size of an action space: 5 ("single"), 17 ("pairs")."""
    if action_space == "single":
        return N_ACTIONS
    if action_space == "pairs":
        return N_PAIR_ACTIONS
    raise ObservationLayoutError(f"action_space must be one of {ACTION_SPACES}, got {action_space!r}")


def action_slots(action: int, action_space: str = "single") -> tuple[int, ...]:
    """The slots an action shows, in order: () for skip, (j,) for one slot, (i, j) for a pair."""
    n = n_actions(action_space)
    if not 0 <= action < n:
        raise ValueError(f"action {action} is outside Discrete({n})")
    if action == 0:
        return ()
    if action < N_ACTIONS:
        return (action,)
    return PAIR_SLOTS[action - N_ACTIONS]


def pair_action(first: int, second: int) -> int:
    """The pair-space action that shows slot `first`, then slot `second` (1-based, distinct)."""
    return N_ACTIONS + PAIR_SLOTS.index((first, second))


def expand_pair_mask(mask: ArrayT) -> ArrayT:
    """A single-space mask (…, 5) as the pair-space mask (…, 17): a pair is valid when both of
    its slots are. numpy in → numpy, torch in → torch."""
    x: Any = mask
    if type(mask).__module__.startswith("torch"):
        import torch

        return torch.cat([x, x[..., _PAIR_FIRST] & x[..., _PAIR_SECOND]], dim=-1)  # type: ignore[return-value]
    arr = np.asarray(x, dtype=bool)
    return np.concatenate([arr, arr[..., _PAIR_FIRST] & arr[..., _PAIR_SECOND]], axis=-1)  # type: ignore[return-value]


def mask_for(n_valid: int, action_space: str = "single") -> np.ndarray:
    """The mask of an observation whose first `n_valid` slots hold records (what
    `mask_from_observation` reads back from it), without reading the observation."""
    mask = np.zeros(N_ACTIONS, dtype=bool)
    mask[: 1 + max(0, min(n_valid, N_SLOTS))] = True
    if n_actions(action_space) == N_PAIR_ACTIONS:
        return expand_pair_mask(mask)
    return mask


def _validity_selector(validity_indices: Sequence[int]) -> slice | list[int]:
    """A strided slice when the indices are evenly spaced (a view, no gather), else the list."""
    idx = [int(i) for i in validity_indices]
    if len(idx) >= 2:
        step = idx[1] - idx[0]
        if step > 0 and all(b - a == step for a, b in zip(idx, idx[1:], strict=False)):
            return slice(idx[0], idx[-1] + 1, step)
    if len(idx) == 1:
        return slice(idx[0], idx[0] + 1)
    return idx


_SELECTORS: dict[tuple[int, ...], slice | list[int]] = {}


def mask_from_observation(
    obs: ArrayT, validity_indices: Sequence[int] = VALIDITY_INDICES, *, pairs: bool = False
) -> ArrayT:
    """The action mask ``[True, valid_1, …]`` (…, 1 + len(validity_indices)) read from a single
    observation or a batch; numpy in → numpy bool, torch in → torch bool on the same device.
    Skip is always valid, so no row is ever all-masked. ``pairs=True``: the pair action space's
    mask (…, 17), `expand_pair_mask` of that."""
    if pairs:
        return expand_pair_mask(mask_from_observation(obs, validity_indices))
    key = tuple(validity_indices)
    selector = _SELECTORS.get(key)
    if selector is None:
        selector = _SELECTORS[key] = _validity_selector(key)
    x: Any = obs if type(obs).__module__.startswith("torch") else np.asarray(obs)
    dims = x.shape[-1]
    if key and dims <= max(key):
        raise ObservationLayoutError(
            f"observation has {dims} dims, validity index {max(key)} is out of range"
        )
    if x is obs and not isinstance(obs, np.ndarray):  # torch: pad a skip column of ones
        from torch.nn.functional import pad

        return pad(x[..., selector].float(), (1, 0), value=1.0) > 0.5  # type: ignore[return-value]
    out_np = np.ones(x.shape[:-1] + (len(key) + 1,), dtype=bool)
    out_np[..., 1:] = x[..., selector] > 0.5
    return out_np  # type: ignore[return-value]


def describe(obs: np.ndarray) -> dict[str, Any]:
    """A readable dict of one observation's slot and budget features (for logging and debugging)."""
    arr = np.asarray(obs, dtype=np.float32)
    if arr.shape not in ((OBS_DIM,), (OBS_DIM_EXTENDED,)):
        raise ObservationLayoutError(f"expected shape ({OBS_DIM},) or ({OBS_DIM_EXTENDED},), got {arr.shape}")
    slots_out = [
        dict(zip(SLOT_FEATURES, (float(v) for v in arr[slot(j)]), strict=True)) for j in range(1, N_SLOTS + 1)
    ]
    if arr.shape == (OBS_DIM_EXTENDED,):
        for j, row in enumerate(slots_out, start=1):
            row.update(zip(EXTRA_SLOT_FEATURES, (float(v) for v in arr[extra_slot(j)]), strict=True))
    budget_out = dict(zip(BUDGET_FEATURES, (float(v) for v in arr[BUDGET]), strict=True))
    return {"slots": slots_out, "budget": budget_out, "mask": mask_from_observation(arr).tolist()}
