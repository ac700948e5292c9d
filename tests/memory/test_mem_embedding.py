"""The hashing embedder: shape, dtype, unit norm, similarity sense, ids and mismatch errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cm_gym.memory.embedding import DIM, Embedder
from cm_gym.memory.errors import EmbedderMismatchError


def test_shape_dtype_and_unit_norm() -> None:
    e = Embedder()
    v = e.embed(["List people aged at least 18", "strictly above 18", ""])
    assert v.shape == (3, DIM) and v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    assert norms[0] == pytest.approx(1.0, abs=1e-5) and norms[1] == pytest.approx(1.0, abs=1e-5)
    assert norms[2] == 0.0  # empty text: zero vector, not NaN
    assert (v >= 0).all()  # alternate_sign=False
    assert e.embed([]).shape == (0, DIM)


def test_similar_texts_are_closer_and_embedding_is_deterministic() -> None:
    e = Embedder()
    a, b, c = e.embed(
        [
            "A numeric threshold predicate may omit its boundary value.",
            "A numeric threshold comparison may omit the boundary value.",
            "Join the orders table on the customer key.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2
    assert np.array_equal(Embedder().embed(["x y z"]), e.embed(["x y z"]))


def test_embed_one_is_cached_and_read_only() -> None:
    e = Embedder()
    v1 = e.embed_one("hello world")
    assert e.embed_one("hello world") is v1
    assert not v1.flags.writeable
    assert np.allclose(v1, e.embed(["hello world"])[0])


def test_ids_round_trip_and_mismatch_is_an_error() -> None:
    e = Embedder()
    assert e.embedder_id == "hashing-char_wb-3to5-512-v1"
    assert Embedder.from_id(e.embedder_id).embedder_id == e.embedder_id
    other = Embedder(ngram_range=(2, 4))
    assert other.embedder_id != e.embedder_id
    with pytest.raises(EmbedderMismatchError):
        e.check_compatible(other.embedder_id, DIM)
    with pytest.raises(EmbedderMismatchError):
        e.check_compatible(e.embedder_id, 256)
    with pytest.raises(EmbedderMismatchError, match="unknown embedder"):
        Embedder.from_id("sentence-transformers/all-MiniLM")


EDGE_TEXTS = [
    "",
    "   \t\n ",
    "Task: Give the titles of books whose price is 14.5 or higher.\nPrevious attempt:\n"
    "SELECT title FROM books WHERE price > 14.5\nEnvironment:\n  books(book_id INTEGER PK, title TEXT)",
    "SELECT T1.name FROM teams AS T1 JOIN players AS T2 ON T1.team_id = T2.team_id",
    "ÄÖü ✓ 中文 text  ΟΔΟΣ Σ σς İstanbul ǅ ß",
    "a",
    "ab abc abcd abcde abcdef",
    "x\u00a0y\u2003z a\x1cb\x1fc tab\there\r\nnew",
    "repeat repeat repeat REPEAT Repeat",
]


def test_rows_equal_sklearns_hashing_vectorizer_bit_for_bit() -> None:
    """`embed` sums cached per-word rows (issue 35 item 1): each row must be exactly what
    sklearn's HashingVectorizer gives for the whole text, one by one, in a batch and from
    `prefetch`."""
    embedder = Embedder()
    reference = np.asarray(embedder.reference_vectorizer().transform(EDGE_TEXTS).toarray(), dtype=np.float32)
    assert np.array_equal(embedder.embed(EDGE_TEXTS), reference)
    fresh = Embedder()
    for text, row in zip(EDGE_TEXTS, reference, strict=True):
        assert np.array_equal(fresh.embed([text])[0], row)
    prefetched = Embedder()
    prefetched.prefetch(EDGE_TEXTS)
    for text, row in zip(EDGE_TEXTS, reference, strict=True):
        assert np.array_equal(prefetched.embed_one(text), row)


def test_l2_rows_is_sklearns_csr_normalisation_bit_for_bit() -> None:
    """`l2_rows` replaces building a CSR matrix for sklearn's in-place L2 normalisation: the same
    float32 bits on counts of both signs, wide magnitudes, zero rows and signed zeros."""
    from scipy import sparse
    from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

    from cm_gym.memory.embedding import l2_rows

    rng = np.random.default_rng(35)
    for trial in range(400):
        n, dim = int(rng.integers(1, 5)), int(rng.choice([1, 7, DIM]))
        rows = rng.integers(-40, 40, size=(n, dim)) * (rng.random((n, dim)) < rng.random())
        rows = rows * (10.0 ** rng.uniform(-15, 15) if trial % 3 == 0 else 1.0)
        rows = rows.astype(np.float32)
        rows[0] = -0.0 if trial % 5 == 0 else rows[0]  # a zero row (of negative zeros)
        expected = sparse.csr_matrix(rows)
        inplace_csr_row_normalize_l2(expected)
        assert l2_rows(rows).tobytes() == np.asarray(expected.toarray(), dtype=np.float32).tobytes()


def test_l2_count_row_is_l2_rows_bit_for_bit_on_counts_of_any_size() -> None:
    """`l2_count_row` sums the squares of small counts as integers: the same float32 bits as
    `l2_rows` on sparse and dense counts, on a zero row, and past its exact bound (where it hands
    over to `l2_rows`), whose single counts reach 5,000 (squares no longer exact in float32)."""
    from cm_gym.memory.embedding import l2_count_row, l2_rows

    rng = np.random.default_rng(36)
    for trial in range(600):
        counts = np.zeros(DIM, dtype=np.int64)
        k = int(rng.integers(0, 300))
        top = int(rng.choice([2, 40, 4095, 5001]))
        np.add.at(counts, rng.integers(0, DIM, k), rng.integers(1, top, k))
        if trial % 9 == 0:
            counts[:] = 0
        total = int(counts.sum())
        expected = l2_rows(counts[None, :].astype(np.float32))[0]
        assert l2_count_row(counts, total).tobytes() == expected.tobytes()
        if total < 4096:  # the integer path itself, whatever the caller's bound
            assert l2_count_row(counts, 0).tobytes() == expected.tobytes()


def test_a_fresh_embedder_reads_the_vectors_an_earlier_one_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The persistent work memo (issue 35): the same float32 bytes, read-only, and a stored
    value of the wrong size is computed again."""
    from cm_gym.core import workmemo
    from cm_gym.memory import embedding

    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CM_GYM_WORK_MEMO", raising=False)
    texts = [f"SELECT name FROM singer WHERE age > {i} -- question {i}" for i in range(30)]
    first = Embedder()
    want = [first.embed_one(t).copy() for t in texts[:10]]
    first.prefetch(texts[10:])
    want += [first.embed_one(t).copy() for t in texts[10:]]
    memo = embedding._MEMOS[first.embedder_id]
    memo.close()  # as a later process: the file is opened again
    later = Embedder()
    before = memo.hits
    got = [later.embed_one(t) for t in texts]
    assert memo.hits - before == len(texts)
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(want, got, strict=True))
    assert not got[0].flags.writeable
    memo.put(workmemo.memo_key("odd text"), b"\x00" * 12)
    memo.close()
    assert np.array_equal(Embedder().embed_one("odd text"), first.embed(["odd text"])[0])


def _random_texts(rng: np.random.Generator, n: int) -> list[str]:
    """Texts over ASCII, punctuation, whitespace of every kind, accented, Greek (final sigma),
    CJK, emoji and characters whose lower case is longer (İ), in words of 1–12 characters."""
    alphabet = (
        list("abcXYZ019 _.,()'=<>*")
        + list("\t\n\r\x0b\x0c\x1c\x1f\u00a0\u2003\u3000")
        + list("ÄÖüßéñ ΣσςΟΔ İıǅ 中文字 ✓😀 \u0301")
    )
    out = []
    for _ in range(n):
        words = int(rng.integers(0, 9))
        out.append("".join(str(rng.choice(alphabet)) for _ in range(int(rng.integers(0, 12 * words + 1)))))
    return out


@pytest.mark.parametrize(("ngram_range", "dim"), [((3, 5), DIM), ((1, 1), 7), ((2, 4), 1000), ((1, 6), 1)])
def test_random_unicode_texts_equal_sklearn_for_other_ranges_and_sizes(
    ngram_range: tuple[int, int], dim: int
) -> None:
    """The hand-held analyzer and hash (module doc) against sklearn on 300 random texts per
    configuration, bit for bit: n-gram lengths from 1 to 6, a prime and a non-power-of-two size,
    and one feature."""
    texts = _random_texts(np.random.default_rng(dim), 300)
    embedder = Embedder(n_features=dim, ngram_range=ngram_range)
    reference = np.asarray(embedder.reference_vectorizer().transform(texts).toarray(), dtype=np.float32)
    assert embedder.embed(texts).tobytes() == reference.tobytes()


def test_a_hash_of_minus_two_to_the_31_gets_sklearns_index() -> None:
    """sklearn defines the index of h = -2**31 (whose 32-bit abs overflows) as 2**31 % n; the
    64-bit abs here must give the same for every size."""
    import mmh3

    from cm_gym.memory.embedding import hashed_indices

    original = mmh3.hash
    try:
        mmh3.hash = lambda *args, **kw: -(2**31)
        for n in (1, 7, 512, 1000, 2**31 - 1):
            assert int(hashed_indices(["x"], n)[0]) == (2147483647 - (n - 1)) % n == 2**31 % n
    finally:
        mmh3.hash = original


def test_lone_surrogates_get_a_vector_not_an_exception() -> None:
    """Untrusted text may hold a lone surrogate (JSON allows "\\ud800"), which UTF-8 cannot
    encode: sklearn raises there; the embedder hashes its ``surrogatepass`` bytes."""
    e = Embedder()
    v = e.embed(["SELECT \ud800 name", "name"])
    assert np.linalg.norm(v[0]) == pytest.approx(1.0, abs=1e-5)
    assert not np.array_equal(v[0], v[1])
    assert np.array_equal(e.embed(["SELECT \ud800 name"]), Embedder().embed(["SELECT \ud800 name"]))


def test_embedding_does_not_import_sklearn() -> None:
    """The reason the hashing is not sklearn's object (module doc): a process that embeds never
    imports scikit-learn (1.1 s, 62,000 objects for the garbage collector)."""
    import subprocess
    import sys

    code = (
        "import sys; from cm_gym.memory.embedding import Embedder; Embedder().embed(['a b', 'SELECT 1']);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_invalid_configurations_are_refused() -> None:
    for kw in ({"ngram_range": (0, 2)}, {"ngram_range": (4, 3)}, {"n_features": 0}):
        with pytest.raises(ValueError, match="invalid embedder"):
            Embedder(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [DIM, 70_000])
def test_long_words_are_hashed_like_sklearn_and_not_cached(dim: int) -> None:
    """Untrusted text may be made of long distinct tokens (a blob in model output): their rows
    are still sklearn's, 16-bit indices or wider ones alike, and only words up to
    `_MAX_CACHED_WORD` characters enter the word cache, which bounds its memory."""
    from cm_gym.memory.embedding import _MAX_CACHED_WORD

    rng = np.random.default_rng(dim)
    long_words = ["".join(rng.choice(list("abcdefXYZ0189+/="), size=int(n))) for n in (65, 200, 2000)]
    short = "a" * _MAX_CACHED_WORD
    texts = [" ".join(long_words), f"SELECT {short} FROM t", long_words[2]]
    embedder = Embedder(n_features=dim)
    reference = np.asarray(embedder.reference_vectorizer().transform(texts).toarray(), dtype=np.float32)
    assert embedder.embed(texts).tobytes() == reference.tobytes()
    assert short in embedder._words and not any(w in embedder._words for w in long_words)
    assert embedder._words[short].dtype == (np.uint16 if dim <= 1 << 16 else np.intp)  # the 16-bit bound


def test_ascii_words_hash_as_their_bytes_do() -> None:
    """`hashed_indices(..., ascii_only=True)` hands mmh3 the strings themselves: the same indices
    as their UTF-8 bytes give, on random ASCII words of every printable character (the embedder
    takes this path only for ASCII words: mmh3 crashes on a str with a lone surrogate)."""
    import random

    from cm_gym.memory.embedding import char_wb_ngrams, hashed_indices

    rng = random.Random(37)
    for _ in range(300):
        word = "".join(rng.choice([chr(c) for c in range(33, 127)]) for _ in range(rng.randint(1, 30)))
        for size in (DIM, 7, 1 << 17):
            grams = char_wb_ngrams(word, (3, 5))
            assert np.array_equal(hashed_indices(grams, size, True), hashed_indices(grams, size))
