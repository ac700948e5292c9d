"""A small text memory shared by the baselines: items with a retrieval key, an embedding (the
same φ as CounterMem's retrieval, `cm_gym.memory.embedding.Embedder`), a creation order and a
weight (votes, importance), saved as plain JSON."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.memory.embedding import Embedder
from cm_gym.studies.mechanisms.base import Guidance, GuidanceItem


@dataclass(frozen=True)
class MemoryItem:
    """One stored item: `text` is shown to the LLM, `key` is what retrieval embeds."""

    item_id: str
    text: str
    key: str
    source_task_id: str = ""
    order: int = 0
    weight: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def guidance(self) -> GuidanceItem:
        return GuidanceItem(self.item_id, self.text, self.source_task_id)


def item_id(*parts: str) -> str:
    """A short content hash for an item id."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]


class ItemBank:
    """Items plus their unit-norm key embeddings; similarity search excludes a task's own items."""

    def __init__(self, embedder: Embedder | None = None, items: Iterable[MemoryItem] = ()) -> None:
        self.embedder = embedder or Embedder()
        self.items: list[MemoryItem] = []
        self._emb = np.zeros((0, self.embedder.dim), dtype=np.float32)
        for item in items:
            self.add(item)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: MemoryItem) -> MemoryItem:
        """Append an item (its order is its position)."""
        item = replace(item, order=len(self.items))
        self.items.append(item)
        self._emb = np.vstack([self._emb, self.embedder.embed_one(item.key)[None, :]])
        return item

    def update(self, index: int, item: MemoryItem) -> None:
        """Replace item `index` (same key embedding unless the key changed)."""
        if item.key != self.items[index].key:
            self._emb[index] = self.embedder.embed_one(item.key)
        self.items[index] = item

    def find(self, item_id_: str) -> int | None:
        return next((i for i, it in enumerate(self.items) if it.item_id == item_id_), None)

    def similarities(self, query: str) -> np.ndarray:
        """cos(φ(query), φ(key)) for every item."""
        if not self.items:
            return np.zeros(0, dtype=np.float32)
        return self._emb @ self.embedder.embed_one(query)

    def eligible(self, exclude_task: str | None) -> np.ndarray:
        """Mask of items not from `exclude_task` (SPEC §7: never a task's own memory)."""
        return np.array([it.source_task_id != exclude_task for it in self.items], dtype=bool)

    def top_k(self, query: str, k: int, exclude_task: str | None = None) -> list[tuple[MemoryItem, float]]:
        """The k most similar eligible items, best first (ties: older first)."""
        if not self.items or k <= 0:
            return []
        sims = self.similarities(query)
        idx = np.flatnonzero(self.eligible(exclude_task))
        order = sorted(idx, key=lambda i: (-float(sims[i]), i))[:k]
        return [(self.items[i], float(sims[i])) for i in order]

    def guidance(self, task: Task, k: int) -> Guidance | None:
        """The k items most similar to the task's question (how the baselines' sources retrieve:
        by the task / query), never the task's own, as guidance (None when there are none)."""
        hits = self.top_k(task.prompt, k, task.task_id)
        return Guidance(tuple(it.guidance() for it, _ in hits), len(hits)) if hits else None

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(it) for it in self.items]

    @classmethod
    def from_json(cls, data: Sequence[dict[str, Any]], embedder: Embedder | None = None) -> ItemBank:
        return cls(embedder, (MemoryItem(**d) for d in data))
