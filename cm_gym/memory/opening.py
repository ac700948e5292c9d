"""Opening a store file of either kind: a frozen snapshot (verified against its manifest) or a
live, writable store. Apart from both modules because the live store freezes into a snapshot."""

from __future__ import annotations

from pathlib import Path

from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.schema import manifest_path, snapshot_reason
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.memory.store import RecordStore
from cm_gym.memory.view import StoreView


def open_store(path: str | Path, *, embedder: Embedder | None = None) -> StoreView:
    """Open either kind: a file with a manifest is a verified `FrozenStore`, a live store a
    writable `RecordStore` (which must exist). A snapshot whose manifest is missing is refused —
    it is never opened writable and cannot be verified — and its bytes are left untouched."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"store not found: {path}")
    if manifest_path(path).is_file():
        return FrozenStore.open(path, embedder=embedder)
    reason = snapshot_reason(path)
    if reason:
        raise StoreError(
            f"{path} is a frozen snapshot whose manifest {manifest_path(path).name} is missing: restore "
            "the manifest (or re-freeze from the live store); `cm-gym memory list` can still read it"
        )
    return RecordStore(path, embedder=embedder)
