"""The text embedding φ / E: 512-dim character n-gram hashing, L2-normalised (SPEC §3).

The vectors are scikit-learn's `HashingVectorizer`'s (``analyzer="char_wb"``, ``n_features=512``,
``alternate_sign=False``, ``norm="l2"``) bit for bit, and `reference_vectorizer` builds that
vectorizer; `tests/memory/test_mem_embedding.py` pins the equality on edge texts and on random
Unicode texts. They are computed without importing scikit-learn: its import cost 1.1 s of wall
clock (1.6 s of CPU) in every process that made an env, and left 62,000 objects — half of a fresh
`cm_gym/SQL-v0` process's — for the garbage collector to scan on every full collection, one of
which fell in the first 2,000 decisions (85–90 ms). What the vectorizer does is small and fixed:
``char_wb`` n-grams of each lower-cased whitespace-separated word padded with a space on each side
(`char_wb_ngrams`, sklearn's loop), each n-gram's UTF-8 bytes hashed with MurmurHash3 (x86, 32-bit,
seed 0, signed; the maintained `mmh3` library, the function sklearn's ``murmurhash3_32`` wraps),
feature index ``abs(hash) % n_features``, counts summed, rows L2-normalised (`l2_rows`). SPEC §3
names the constructor without an n-gram range; sklearn's default range (1, 1) would hash single
characters, which is not the paper's "character n-gram" representation, so the default here is
``ngram_range=(3, 5)``. The range is part of `embedder_id`, which every store records: a reader
with another embedder gets a clear `EmbedderMismatchError` instead of silently comparing
incomparable vectors.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import OrderedDict
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mmh3
import numpy as np

from cm_gym.core import workmemo
from cm_gym.core.workmemo import WorkMemo
from cm_gym.memory.errors import EmbedderMismatchError

DIM = 512
DEFAULT_NGRAM_RANGE = (3, 5)
_WORD_CACHE_SIZE = 200_000
#: longer words are hashed every time, not cached: a word's entry holds one index per n-gram (about
#: three per character), so with this cap and 16-bit indices the cache stays under ~80 MB even when
#: untrusted text (model output) is made of distinct long tokens
_MAX_CACHED_WORD = 64
_ID = re.compile(r"hashing-char_wb-(\d+)to(\d+)-(\d+)-v1")
_MEMOS: dict[str, WorkMemo] = {}


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """This file's digest and mmh3's version: what an embedding depends on besides its id."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return f"{digest}-mmh3{version('mmh3')}"


def char_wb_ngrams(word: str, ngram_range: tuple[int, int]) -> list[str]:
    """The ``char_wb`` n-grams of one whitespace-free `word`, as sklearn's analyzer makes them
    (``HashingVectorizer(analyzer="char_wb", lowercase=True).build_analyzer()(word)``): the word
    lower-cased and padded with one space on each side, every n-gram of each length in
    `ngram_range` from left to right, a padded word shorter than n giving itself once (and no
    longer n-grams)."""
    lo, hi = ngram_range
    padded = " " + word.lower() + " "
    size = len(padded)
    out: list[str] = []
    for n in range(lo, hi + 1):
        if size <= n:
            out.append(padded)
            break
        out.extend([padded[i : i + n] for i in range(size - n + 1)])
    return out


def hashed_indices(ngrams: list[str], n_features: int, ascii_only: bool = False) -> np.ndarray:
    """Each n-gram's feature index as sklearn's `FeatureHasher` computes it: MurmurHash3 (x86,
    32-bit, seed 0, signed) of its UTF-8 bytes, ``abs(h) % n_features`` (for h = -2**31 sklearn
    defines the index as ``2**31 % n_features``, which the 64-bit ``abs`` gives). Lone surrogates
    (which UTF-8 cannot encode, and on which sklearn raises) are hashed as their
    ``surrogatepass`` bytes: untrusted text gets a vector, never an exception.

    With `ascii_only` (the caller knows every n-gram is ASCII: its bytes are its characters) the
    strings are handed to mmh3 as they are, 40% faster per word. Never otherwise: mmh3 5.3 crashes
    the interpreter (a segmentation fault) on a ``str`` holding a lone surrogate."""
    if ascii_only:
        hashes = np.array([mmh3.hash(g, 0, True) for g in ngrams], dtype=np.int64)
    else:
        hashes = np.fromiter(
            (mmh3.hash(g.encode("utf-8", "surrogatepass"), 0, True) for g in ngrams),
            dtype=np.int64,
            count=len(ngrams),
        )
    return (np.abs(hashes) % n_features).astype(np.uint16 if n_features <= 1 << 16 else np.intp)


def l2_rows(rows: np.ndarray) -> np.ndarray:
    """Each float32 row divided by its L2 norm (a zero row left as it is), bit for bit what
    sklearn's ``normalize(norm="l2")`` gives on the CSR matrix of `rows`
    (``inplace_csr_row_normalize_l2``): each stored value squared in float32, the squares summed
    in float64 in index order (a zero adds nothing exactly, and `cumsum` adds left to right, as
    its loop does — `sum` would add pairwise), the square root in float64, each value divided by it
    in float64 and rounded to float32; a -0.0 comes out as 0.0 (a CSR matrix does not store it)."""
    squares = np.square(rows, dtype=np.float32).astype(np.float64)
    norms = np.sqrt(np.cumsum(squares, axis=1)[:, -1]) if rows.shape[1] else np.zeros(len(rows))
    norms[norms == 0.0] = 1.0
    return (rows.astype(np.float64) / norms[:, None] + 0.0).astype(np.float32)  # + 0.0: no -0.0


def l2_count_row(counts: np.ndarray, total: int) -> np.ndarray:
    """`l2_rows` of one row of integer `counts` that sum to `total`, bit for bit, in three numpy
    calls instead of eight (4 us against 15 us per text). When every count is below 4,096 (surely
    when `total` is) each square is exact in float32 and each partial sum of squares exact in
    float64 (below 2**33), so the sum `l2_rows` adds up in index order is the integer
    ``counts · counts``; its square root and the float64 division are the same operations. A
    count of 0 stays +0.0 (no -0.0 to clear). Larger totals go through `l2_rows` itself."""
    if total >= _EXACT_COUNTS:
        return l2_rows(counts[None, :].astype(np.float32))[0]
    squares = int(counts @ counts)
    return counts.astype(np.float32) if squares == 0 else (counts / math.sqrt(squares)).astype(np.float32)


#: below this many n-grams in a text, `l2_count_row` sums the squares as integers
_EXACT_COUNTS = 4096


class Embedder:
    """Embeds texts into L2-normalised float32 vectors; `embed_one` keeps a small LRU cache
    (RL training re-embeds the same state texts many times)."""

    def __init__(
        self,
        n_features: int = DIM,
        ngram_range: tuple[int, int] = DEFAULT_NGRAM_RANGE,
        cache_size: int = 4096,
    ) -> None:
        self.dim = int(n_features)
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))
        if not 1 <= self.ngram_range[0] <= self.ngram_range[1] or self.dim < 1:
            raise ValueError(f"invalid embedder: ngram_range {self.ngram_range}, n_features {self.dim}")
        self._words: dict[str, np.ndarray] = {}
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def reference_vectorizer(self) -> Any:
        """The scikit-learn `HashingVectorizer` whose ``transform`` rows `embed` equals bit for bit
        (imports scikit-learn: for checking, not for embedding)."""
        from sklearn.feature_extraction.text import HashingVectorizer

        return HashingVectorizer(
            analyzer="char_wb",
            ngram_range=self.ngram_range,
            n_features=self.dim,
            alternate_sign=False,
            norm="l2",
            lowercase=True,
            dtype=np.float32,
        )

    @property
    def embedder_id(self) -> str:
        """Identifies the representation, e.g. ``hashing-char_wb-3to5-512-v1``."""
        lo, hi = self.ngram_range
        return f"hashing-char_wb-{lo}to{hi}-{self.dim}-v1"

    @classmethod
    def from_id(cls, embedder_id: str) -> Embedder:
        """Rebuild the embedder a store names; an unknown id is an `EmbedderMismatchError`."""
        m = _ID.fullmatch(embedder_id)
        if not m:
            raise EmbedderMismatchError(
                f"unknown embedder id {embedder_id!r} (this cm_gym knows hashing-char_wb-*)"
            )
        return cls(n_features=int(m.group(3)), ngram_range=(int(m.group(1)), int(m.group(2))))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, each row L2-normalised (an empty text gives a zero row).

        Exactly `HashingVectorizer.transform`'s rows (module doc), computed word by word:
        ``char_wb`` n-grams never cross whitespace, so a text's hashed n-gram counts are the sum
        of its words' (each word's feature indices hashed once, then cached); the integer counts
        are summed exactly and normalised as sklearn normalises its sorted CSR row (`l2_rows`,
        by way of `l2_count_row`). Texts share most words (the schema, the question), so a new
        text costs a split and a count instead of re-deriving and hashing every n-gram."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = text.split()
            if words:
                index = np.concatenate([self._word_indices(word) for word in words])
                out[row] = l2_count_row(np.bincount(index, minlength=self.dim), len(index))
        return out

    def _word_indices(self, word: str) -> np.ndarray:
        """The feature index of each n-gram of one whitespace-free word (repeats kept: a count
        is how often an index occurs), cached up to `_MAX_CACHED_WORD` characters: the vocabulary
        of a benchmark's texts is small."""
        found = self._words.get(word)
        if found is None:
            found = hashed_indices(char_wb_ngrams(word, self.ngram_range), self.dim, word.isascii())
            if len(word) <= _MAX_CACHED_WORD:
                if len(self._words) >= _WORD_CACHE_SIZE:
                    self._words.clear()
                self._words[word] = found
        return found

    def embed_one(self, text: str) -> np.ndarray:
        """(dim,) float32 for one text, cached (the returned array is read-only)."""
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            return hit
        vec = self._stored(text)
        if vec is None:
            vec = self.embed([text])[0]
            vec.setflags(write=False)
            self._store(text, vec)
        self._cache[text] = vec
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return vec

    def prefetch(self, texts: Sequence[str]) -> None:
        """Embed the texts `embed_one` has not cached in one `embed` call and cache them (a
        decision embeds two or three new texts; one call, one normalisation). Each row is what
        `embed_one` would compute alone (the hashing and the L2 norm are per row)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if len(missing) < 2:
            return
        unknown = []
        for text in missing:
            vec = self._stored(text)
            if vec is None:
                unknown.append(text)
            else:
                self._cache[text] = vec
        for text, vec in zip(unknown, self.embed(unknown) if unknown else (), strict=True):
            vec.setflags(write=False)
            self._store(text, vec)
            self._cache[text] = vec
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # -- the persistent work memo (`cm_gym.core.workmemo`): a fresh process reuses the vectors an
    # earlier one computed; exact float32 bytes, versioned by this file, the id and mmh3 --------
    def _work_memo(self) -> WorkMemo | None:
        if not workmemo.enabled():
            return None
        memo = _MEMOS.get(self.embedder_id)
        if memo is None:
            memo = _MEMOS[self.embedder_id] = WorkMemo("embeddings", f"{self.embedder_id}-{_code_version()}")
        return memo

    def _stored(self, text: str) -> np.ndarray | None:
        memo = self._work_memo()
        data = memo.get(workmemo.memo_key(text)) if memo is not None else None
        if not isinstance(data, bytes) or len(data) != 4 * self.dim:
            return None
        return np.frombuffer(data, dtype=np.float32)  # read-only, as `embed_one` returns

    def _store(self, text: str, vec: np.ndarray) -> None:
        memo = self._work_memo()
        if memo is not None:
            memo.put(workmemo.memo_key(text), np.ascontiguousarray(vec, dtype=np.float32).tobytes())

    def check_compatible(self, embedder_id: str, dim: int | None = None) -> None:
        """Raise `EmbedderMismatchError` unless a store written with `embedder_id` reads with this."""
        if embedder_id != self.embedder_id or (dim is not None and int(dim) != self.dim):
            raise EmbedderMismatchError(
                f"store was embedded with {embedder_id!r} (dim {dim}), reader uses {self.embedder_id!r} "
                f"(dim {self.dim}); rebuild the store or read it with its own embedder"
            )
