"""The hashing embedder: shape, dtype, unit norm, similarity sense, ids and mismatch errors."""

from __future__ import annotations

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
