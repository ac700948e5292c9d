"""Errors raised by the memory package (all subclasses of `cm_gym.core.types.CmGymError`). The
condition grammar's `ConditionParseError` lives with the grammar, below the domains."""

from __future__ import annotations

from cm_gym.core.types import CmGymError
from cm_gym.domains.conditions import ConditionParseError

__all__ = [
    "ConditionParseError",
    "DuplicateRecordError",
    "EmbedderMismatchError",
    "MemoryError_",
    "StoreError",
    "StoreFullError",
    "StoreLockedError",
    "StoreReadOnlyError",
]


class MemoryError_(CmGymError):
    """Base class of memory errors (trailing underscore: `MemoryError` is a Python builtin)."""


class StoreError(MemoryError_):
    """The file is not a usable cm_gym record store (corrupt, foreign, newer schema, tampered)."""


class StoreReadOnlyError(StoreError):
    """A write was attempted on a frozen snapshot (or a store opened read-only)."""


class DuplicateRecordError(StoreError):
    """A record with the same content hash is already stored."""


class EmbedderMismatchError(StoreError):
    """The store was embedded with a different embedder than the reader's."""


class StoreLockedError(StoreError):
    """Another process holds the store (its writer lock, or a SQLite lock past the busy timeout).
    Not corruption: wait for the other process, or use another file."""


class StoreFullError(StoreError):
    """The disk (or the database's size limit) is full. The failed transaction was rolled back;
    everything committed before it is intact."""
