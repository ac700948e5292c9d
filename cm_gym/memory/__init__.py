"""Verified counterfactual memory: records, conditions, the SQLite store and its frozen snapshots,
retrieval, admission / retention, and construction (paper Modules I–II, Algorithm 1 lines 3–14).

The memory package never imports an RL env or a selector agent (ARCHITECTURE.md).
"""

from __future__ import annotations

from cm_gym.domains.conditions import (
    GENERIC_PREDICATES,
    Condition,
    Predicate,
    condition_overlap,
    parse_condition,
    parse_condition_or_none,
)
from cm_gym.memory.admission import AdmissionResult, AdmissionWeights, decide_admission
from cm_gym.memory.alternatives import Alternative, AlternativeGenerator
from cm_gym.memory.construction import ConstructionConfig, build_memory
from cm_gym.memory.embedding import DIM, Embedder
from cm_gym.memory.errors import (
    ConditionParseError,
    DuplicateRecordError,
    EmbedderMismatchError,
    StoreError,
    StoreReadOnlyError,
)
from cm_gym.memory.freshness import FreshView, exclusion_reason
from cm_gym.memory.opening import open_store
from cm_gym.memory.record import Record, compute_record_id
from cm_gym.memory.retention import RETENTION_POLICIES, RetentionWeights, choose_evictions
from cm_gym.memory.retrieval import MODES, Retrieved, Retriever, record_view
from cm_gym.memory.reverify import ReverifyConfig, ReverifySummary, Verdict, reverify_store
from cm_gym.memory.snapshot import FrozenStore, load_readonly
from cm_gym.memory.store import RecordStore
from cm_gym.memory.summary import BuildSummary

__all__ = [
    "DIM",
    "GENERIC_PREDICATES",
    "MODES",
    "RETENTION_POLICIES",
    "AdmissionResult",
    "AdmissionWeights",
    "Alternative",
    "AlternativeGenerator",
    "BuildSummary",
    "Condition",
    "ConditionParseError",
    "ConstructionConfig",
    "DuplicateRecordError",
    "Embedder",
    "EmbedderMismatchError",
    "FreshView",
    "FrozenStore",
    "Predicate",
    "Record",
    "RecordStore",
    "RetentionWeights",
    "ReverifyConfig",
    "ReverifySummary",
    "Retrieved",
    "Retriever",
    "StoreError",
    "StoreReadOnlyError",
    "Verdict",
    "build_memory",
    "choose_evictions",
    "compute_record_id",
    "condition_overlap",
    "decide_admission",
    "exclusion_reason",
    "load_readonly",
    "open_store",
    "parse_condition",
    "parse_condition_or_none",
    "record_view",
    "reverify_store",
]
