"""Approximate nearest-neighbour (ANN) search for retrieval on large frozen stores (faiss-cpu).

The library is the optional extra ``pip install cm-gym[ann]``. Why faiss-cpu: one abi3 wheel per
platform covers CPython 3.10–3.13 (Linux x86-64/aarch64, macOS arm64, Windows; ~19 MB, numpy the
only dependency), Meta maintains it with regular releases, it searches with a filter natively (an
`IDSelectorBitmap` in the search parameters: only eligible rows are ever returned), and it has
compressed codes and IVF indexes that build in minutes, not hours, at millions of records on two
cores. Rejected: hnswlib (sdist only, so a compiler at install time; last release 2023; its filter
is a Python callback per visited node), usearch (2.26: no filtered search from Python), annoy (no
filter; last release 2023), and faiss's own HNSW (216 s to build at 100k records on this 2-core
machine against 10–22 s for the IVF index below, and recall@4 0.94 needed efSearch 128: measured
while choosing, not in the bench).

The index is IVF (k-means coarse quantiser, ~sqrt(n) lists) with 4-bit product-quantised codes
scanned by faiss's SIMD "fast scan" kernels (2 dimensions per sub-quantiser, ~130 bytes per
record; 8-bit scalar codes scan ~50x slower in these wheels, and 4 dimensions per sub-quantiser
lost ~2 % recall@4 on near-tied neighbours: both measured). The vectors are *augmented*:
``x = [e, u, sqrt(1 - u²), 0…] / sqrt(2)`` (unit norm, zero-padded to a multiple of 8). A query
``y = [q, λ, 0…]`` gives ``y·x = (cos(q, e) + λ·u) / sqrt(2)``: the index ranks by the retrieval
rank r itself, for any λ, so a record lifted above closer ones by its reuse utility u is found too.
The caller takes `CANDIDATES` candidates and re-ranks them exactly from the store's own embeddings
(`cm_gym.memory.retrieval`). Rows are the `RecordIndex` rows (sorted by domain and condition);
`layout_digest` names the records and u values in that order, so an index never answers for a
store it was not built from.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.memory.errors import StoreError
from cm_gym.memory.index import RecordSource, index_order, layout_digest, source_columns

logger = logging.getLogger(__name__)

#: A snapshot gets an ANN index at freeze time from this many records on; smaller stores are
#: always searched exactly (the default 200-record stores never touch faiss).
ANN_MIN_RECORDS = 20_000
#: Fewer records than this never get an index, even when asked (4-bit codebooks need the points).
MIN_BUILD_RECORDS = 1000
#: Per query, at most this many eligible rows are scored exactly instead of searched: 8 MB of
#: float32 rows, ~0.3–3 ms here; 16,384 rows already took 13–16 ms (memory-bound, measured).
EXACT_MAX_ROWS = 4_096
#: Candidates fetched from the index per query and re-ranked exactly.
CANDIDATES = 256
INDEX_KIND = "IVF-PQ2x4fs-augmented/1"
_CHUNK = 65_536
_installed: bool | None = None


class AnnUnavailableError(StoreError):
    """faiss-cpu is not installed (``pip install cm-gym[ann]``)."""


def available() -> bool:
    """Is faiss-cpu importable? (checked once)."""
    global _installed
    if _installed is None:
        try:
            import faiss  # noqa: F401

            _installed = True
        except ImportError:
            _installed = False
    return _installed


def require() -> Any:
    """The faiss module, or `AnnUnavailableError` naming the fix."""
    if not available():
        raise AnnUnavailableError("faiss-cpu is not installed: pip install 'cm-gym[ann]' for ANN retrieval")
    import faiss

    return faiss


def default_nlist(n: int) -> int:
    """Inverted lists: ~sqrt(n) as a power of two, at most 8192 and n / 39 (faiss's k-means
    wants 39 training points per list)."""
    lists = 2 ** round(math.log2(math.sqrt(max(n, 1))))
    return int(max(1, min(8192, lists, n // 39)))


def width_for(dim: int) -> int:
    """Augmented width: dim + 2, padded to a multiple of 8 (whole 2-dim sub-quantisers, even M)."""
    return (dim + 2 + 7) // 8 * 8


def augment(emb: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(n, width_for(dim)) float32 rows [e, u, sqrt(1 - u²), 0…] / sqrt(2): unit norm for unit e
    and |u| <= 1 (u is clipped)."""
    n, dim = emb.shape
    u = np.clip(np.asarray(u, dtype=np.float32), -1.0, 1.0)
    out = np.zeros((n, width_for(dim)), dtype=np.float32)
    out[:, :dim] = emb
    out[:, dim] = u
    out[:, dim + 1] = np.sqrt(1.0 - u * u)
    out *= np.float32(1 / math.sqrt(2))
    return out


def set_rows(bits: np.ndarray, start: int, stop: int) -> None:
    """Set bits [start, stop) of a little-endian packed bitmap (faiss's IDSelectorBitmap order)."""
    if stop <= start:
        return
    sb, eb = start >> 3, (stop - 1) >> 3
    first = (0xFF << (start & 7)) & 0xFF
    last = 0xFF >> (7 - ((stop - 1) & 7))
    if sb == eb:
        bits[sb] |= first & last
        return
    bits[sb] |= first
    bits[sb + 1 : eb] = 0xFF
    bits[eb] |= last


def clear_rows(bits: np.ndarray, rows: np.ndarray) -> None:
    """Clear the bits of `rows` (any order, duplicates allowed)."""
    if rows.size:
        rows = np.asarray(rows, dtype=np.int64)
        np.bitwise_and.at(bits, rows >> 3, ~(np.left_shift(1, rows & 7).astype(np.uint8)))


def spans_bitmap(n: int, spans: Iterable[tuple[int, int]]) -> np.ndarray:
    """A packed bitmap over n rows with the rows of `spans` set."""
    bits = np.zeros((n + 7) >> 3, dtype=np.uint8)
    for s, e in spans:
        set_rows(bits, s, e)
    return bits


def _rows_of(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """matrix[rows] as float32 (a slice, not a gather, when rows are consecutive)."""
    if rows.size and rows[-1] - rows[0] == rows.size - 1 and np.all(np.diff(rows) == 1):
        return np.asarray(matrix[int(rows[0]) : int(rows[-1]) + 1], dtype=np.float32)
    return np.asarray(matrix[rows], dtype=np.float32)


def build_for_source(source: RecordSource, **kwargs: Any) -> AnnIndex:
    """An ANN index over every record of a source, in the row order its `RecordIndex` uses."""
    cols = source_columns(source)
    rows = index_order(cols)
    u = np.asarray(cols["u"], dtype=np.float32)[rows]
    ids = cols["record_ids"]
    digest = layout_digest([ids[i] for i in rows], u)
    return AnnIndex.build(source.embeddings, u, digest, rows=rows, **kwargs)


@dataclass
class AnnIndex:
    """A faiss IVF index over the augmented rows of a source, in `RecordIndex` row order."""

    index: Any
    digest: str
    dim: int
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.index.ntotal)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (subprocess vector envs, Ray workers): the faiss index travels serialized."""
        state = dict(self.__dict__)
        state["index"] = require().serialize_index(self.index)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["index"] = require().deserialize_index(state["index"])
        self.__dict__.update(state)

    @classmethod
    def build(
        cls,
        embeddings: np.ndarray,
        u: np.ndarray,
        digest: str,
        *,
        rows: np.ndarray | None = None,
        nlist: int | None = None,
        seed: int = 0,
        train_per_list: int = 64,
    ) -> AnnIndex:
        """Train and fill the index. Row i of the index is ``embeddings[rows[i]]`` with reuse
        utility ``u[i]`` (`rows` defaults to the identity); unit rows of any float dtype, read
        chunk by chunk, never copied whole."""
        faiss = require()
        n, dim = len(u), embeddings.shape[1]
        if rows is None:
            rows = np.arange(n)
        nlist = int(nlist or default_nlist(n))
        t0 = time.perf_counter()
        width = width_for(dim)
        index = faiss.index_factory(width, f"IVF{nlist},PQ{width // 2}x4fs", faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = int(seed)
        index.cp.niter = 10
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(n, size=min(n, train_per_list * nlist), replace=False))
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # many small k-means: threads only wait at barriers (40x slower)
        try:
            index.train(augment(np.asarray(embeddings[rows[sample]], dtype=np.float32), u[sample]))
        finally:
            faiss.omp_set_num_threads(threads)
        for s in range(0, n, _CHUNK):
            e = min(n, s + _CHUNK)
            index.add(augment(_rows_of(embeddings, rows[s:e]), u[s:e]))
        params = {
            "kind": INDEX_KIND,
            "nlist": nlist,
            "seed": int(seed),
            "library": f"faiss {faiss.__version__}",
        }
        logger.info("built an ANN index over %d records in %.1f s (%s)", n, time.perf_counter() - t0, params)
        return cls(index, digest, dim, params)

    def nprobe(self, fraction: float) -> int:
        """Lists probed for a query whose eligible rows are `fraction` of the index: 1/16 of the
        lists (at least 32), a little more when the filter is selective (x1.4 at 10 %, x2 at 1 %).
        Measured at 1M records: 1/16 of the lists gives recall@4 >= 0.988 for eligible fractions
        from 1 % to 30 %; see bench_ann.py for the sizes and mixes it is checked on."""
        nlist = int(self.index.nlist)
        base = max(32, nlist // 16)
        return int(min(nlist, math.ceil(base * max(fraction, 1e-6) ** -0.15)))

    def search(
        self,
        query: np.ndarray,
        lambda_reuse: float,
        k: int,
        allowed: np.ndarray | None = None,
        fraction: float = 1.0,
    ) -> np.ndarray:
        """Up to k candidate rows for `query`, best (approximate) rank first; only rows whose bit
        is set in `allowed` (a packed bitmap) when one is given."""
        faiss = require()
        y = np.zeros((1, width_for(self.dim)), dtype=np.float32)
        y[0, : self.dim] = query
        y[0, self.dim] = lambda_reuse
        sel = None if allowed is None else faiss.IDSelectorBitmap(allowed)
        params = faiss.SearchParametersIVF(nprobe=self.nprobe(fraction), sel=sel)
        _, ids = self.index.search(y, k, params=params)
        ids = ids[0]
        return ids[ids >= 0]

    # -- files ------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the faiss index to `path` (the caller syncs and renames it into place)."""
        require().write_index(self.index, str(path))

    @classmethod
    def load(cls, path: Path, entry: dict[str, Any]) -> AnnIndex:
        """Read an index written by `save`; `entry` is its manifest entry (digest, n, dim)."""
        faiss = require()
        try:
            index = faiss.read_index(str(path))
        except (RuntimeError, MemoryError) as exc:
            raise StoreError(f"{path} is not a readable faiss index: {str(exc).splitlines()[0]}") from None
        dim = int(entry["dim"])
        if index.ntotal != int(entry["records"]) or index.d != width_for(dim):
            raise StoreError(
                f"{path} holds {index.ntotal} rows of dim {index.d}, the manifest says otherwise"
            )
        return cls(index, str(entry["digest"]), dim, dict(entry.get("params", {})))
