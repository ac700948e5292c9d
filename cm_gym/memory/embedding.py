"""The text embedding φ / E: 512-dim character n-gram hashing, L2-normalised (SPEC §3).

The hashing is scikit-learn's `HashingVectorizer` (``analyzer="char_wb"``, ``n_features=512``,
``alternate_sign=False``, ``norm="l2"``), never a hand-written one. SPEC §3 names the constructor
without an n-gram range; sklearn's default range (1, 1) would hash single characters, which is not
the paper's "character n-gram" representation, so the default here is ``ngram_range=(3, 5)``. The
range is part of `embedder_id`, which every store records: a reader with another embedder gets a
clear `EmbedderMismatchError` instead of silently comparing incomparable vectors.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import sklearn
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import HashingVectorizer

from cm_gym.core import workmemo
from cm_gym.core.workmemo import WorkMemo
from cm_gym.memory.errors import EmbedderMismatchError

DIM = 512
DEFAULT_NGRAM_RANGE = (3, 5)
_WORD_CACHE_SIZE = 200_000
_ID = re.compile(r"hashing-char_wb-(\d+)to(\d+)-(\d+)-v1")
_MEMOS: dict[str, WorkMemo] = {}


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """This file's and sklearn's versions: what an embedding depends on besides its id."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return f"{digest}-sklearn{sklearn.__version__}"


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
        self._vectorizer = HashingVectorizer(
            analyzer="char_wb",
            ngram_range=self.ngram_range,
            n_features=self.dim,
            alternate_sign=False,
            norm="l2",
            lowercase=True,
            dtype=np.float32,
        )
        # `HashingVectorizer.transform`'s own parts, built once (its analyzer, its FeatureHasher,
        # sklearn's in-place L2 row norm); see `embed` for how they are used
        self._analyzer = self._vectorizer.build_analyzer()
        self._hasher = FeatureHasher(
            n_features=self.dim, input_type="string", dtype=np.float32, alternate_sign=False
        )
        self._words: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

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

        Exactly `HashingVectorizer.transform`'s rows, computed word by word: ``char_wb`` n-grams
        never cross whitespace, so a text's hashed n-gram counts are the sum of its words'
        (each word's row hashed once by the vectorizer's own analyzer and FeatureHasher, then
        cached); the integer counts are summed exactly and normalised by the same sklearn
        routine on the same sorted CSR row. Texts share most words (the schema, the question),
        so a new text costs a split and a sum instead of re-deriving and hashing every n-gram.
        `tests/memory/test_mem_embedding.py` pins the equality; `l2_rows` normalises as sklearn
        does, without building its sparse matrix (half of this method's cost)."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        counts = np.zeros((len(texts), self.dim), dtype=np.float64)
        split = [text.split() for text in texts]
        self._hash_words(w for words in split for w in words)
        for row, words in enumerate(split):
            parts = [self._word_row(word) for word in words]
            if parts:
                index = np.concatenate([p[0] for p in parts])
                weight = np.concatenate([p[1] for p in parts])
                counts[row] = np.bincount(index, weights=weight, minlength=self.dim)
        return l2_rows(counts.astype(np.float32))

    def _hash_words(self, words: Iterable[str]) -> None:
        """Hash the words not cached yet in one FeatureHasher call (its per-call overhead is
        most of the cost of one word): each row of the batch is the row the word alone gets (the
        hasher sums duplicates and sorts indices row by row), cached as `_word_row` caches it."""
        new = [w for w in dict.fromkeys(words) if w not in self._words]
        if len(new) < 2:
            return
        if len(self._words) + len(new) > _WORD_CACHE_SIZE:
            self._words.clear()
        rows = self._hasher.transform([self._analyzer(w) for w in new])
        for i, word in enumerate(new):
            lo, hi = rows.indptr[i], rows.indptr[i + 1]
            self._words[word] = (
                np.asarray(rows.indices[lo:hi], dtype=np.intp),
                np.asarray(rows.data[lo:hi], dtype=np.float64),
            )

    def _word_row(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        """(feature indices, counts) of one whitespace-free word's n-grams, as the vectorizer
        hashes them (cached; the vocabulary of a benchmark's texts is small)."""
        found = self._words.get(word)
        if found is None:
            row = self._hasher.transform([self._analyzer(word)])
            found = (np.asarray(row.indices, dtype=np.intp), np.asarray(row.data, dtype=np.float64))
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
        """Embed the texts `embed_one` has not cached in one vectorizer call and cache them: a
        decision embeds two or three new texts, and sklearn's per-call overhead is most of the
        cost of one short text. Each row is what `embed_one` would compute alone (the hashing
        and the L2 norm are per row)."""
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
    # earlier one computed; exact float32 bytes, versioned by this file, the id and sklearn ----
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
