"""Spider-style execution accuracy: compare a query's result with the reference result.

* Multisets of rows; row order matters only when the reference sorts its outermost result.
* Columns may come in another order (as in Spider's test-suite evaluation): a column permutation
  is accepted when it makes the results equal.
* Numbers compare with a tolerance (rounded to `digits` significant digits; 1 == 1.0); text and
  numbers never compare equal; NULL equals NULL (NULL-safe).
* Two empty results are equal whatever their columns.

`partial_score` is the optional partial credit: the multiset overlap of rows divided by the larger
row count (0 when the column counts differ), halved when only the order is wrong, and capped at
0.99 so that only a correct result scores 1.

Multisets are compared by sorting, never by hashing: the rows come from an untrusted query, and
Python's hashes of small integers collide on purpose-built values (``hash(-1) == hash(-2)``), so a
``Counter`` of 20,000 such rows took minutes in the trusted process. Every normalised value is
type-tagged and the values of one tag are mutually comparable, so rows have a total order and a
sort costs O(n log n) comparisons whatever the values are.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Row = tuple[Any, ...]
MAX_PERMUTATIONS = 720


def norm_value(value: Any, digits: int) -> tuple[int, Any]:
    """Type-tagged, tolerance-rounded value (NULL-safe; 1 and 1.0 are equal); values of one tag
    are mutually comparable, so normalised rows sort (NaN gets a tag of its own)."""
    if value is None:
        return (0, 0)
    if isinstance(value, (bool, int)):
        return (1, int(value))
    if isinstance(value, float):
        if value != value:
            return (5, 0)
        if abs(value) < 1e18 and value == int(value):
            return (1, int(value))
        return (1, float(f"{value:.{digits}g}"))
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return (3, bytes(value))
    return (4, repr(value))


def norm_rows(rows: Sequence[Row], digits: int) -> list[Row]:
    """Every row's `norm_value`s, with the two commonest types (exactly ``int`` and ``str``: what
    SQLite returns for integers and text) tagged inline: the same values, at half the cost of a
    call per value (a wrong answer's rows are normalised on every check)."""
    return [
        tuple(
            [
                (1, v) if v.__class__ is int else (2, v) if v.__class__ is str else norm_value(v, digits)
                for v in row
            ]
        )  # fmt: skip
        for row in rows
    ]


@dataclass(frozen=True)
class Comparison:
    """Whether the result matches, the partial-credit score, and a short hint for feedback."""

    correct: bool
    partial: float
    hint: str


@dataclass
class Result:
    """A query result: raw rows, column count, and (lazily) its normalised rows."""

    rows: list[Row]
    ncols: int
    digits: int = 10
    _norm: list[Row] | None = None
    _sorted: list[Row] | None = None

    @property
    def norm(self) -> list[Row]:
        if self._norm is None:
            self._norm = norm_rows(self.rows, self.digits)
        return self._norm

    @property
    def sorted(self) -> list[Row]:
        """The normalised rows in their total order: the multiset, without hashing a value."""
        if self._sorted is None:
            self._sorted = sorted(self.norm)
        return self._sorted


def _overlap(a: list[Row], b: list[Row]) -> int:
    """Size of the multiset intersection of two sorted row lists (one merge walk)."""
    i = j = n = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            n, i, j = n + 1, i + 1, j + 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return n


def _distinct(rows: list[Row]) -> list[Row]:
    """The distinct rows of a sorted list, in order."""
    return [r for k, r in enumerate(rows) if k == 0 or r != rows[k - 1]]


def _permutations(pred: Result, ref: Result) -> list[tuple[int, ...]]:
    """Column orders of `pred` whose per-column value multisets match those of `ref`."""
    n = ref.ncols
    sig_ref = [sorted(r[i] for r in ref.norm) for i in range(n)]
    sig_pred = [sorted(r[i] for r in pred.norm) for i in range(n)]
    options = [[j for j in range(n) if sig_pred[j] == sig_ref[i]] for i in range(n)]
    if any(not o for o in options):
        return []
    out: list[tuple[int, ...]] = []
    for perm in itertools.product(*options):
        if len(set(perm)) == n and perm != tuple(range(n)):
            out.append(perm)
            if len(out) >= MAX_PERMUTATIONS:
                break
    return out


def _equal(pred_rows: Sequence[Row], ref: Result, ordered: bool) -> bool:
    return list(pred_rows) == ref.norm if ordered else sorted(pred_rows) == ref.sorted


def compare(pred: Result, ref: Result, *, ordered: bool) -> Comparison:
    """Compare `pred` with the reference result `ref` (see the module docstring)."""
    if pred.ncols == ref.ncols and pred.rows == ref.rows:
        return Comparison(True, 1.0, "")
    if not pred.rows and not ref.rows:
        return Comparison(True, 1.0, "")
    if pred.ncols != ref.ncols:
        return Comparison(False, 0.0, f"wrong number of columns ({pred.ncols} instead of {ref.ncols})")
    if _equal(pred.norm, ref, ordered):
        return Comparison(True, 1.0, "")
    if ref.ncols > 1 and len(pred.rows) == len(ref.rows):
        for perm in _permutations(pred, ref):
            permuted = [tuple(r[j] for j in perm) for r in pred.norm]
            if _equal(permuted, ref, ordered):
                return Comparison(True, 1.0, "")
    return _explain(pred, ref, ordered)


def _explain(pred: Result, ref: Result, ordered: bool) -> Comparison:
    overlap = _overlap(pred.sorted, ref.sorted)
    size = max(len(pred.rows), len(ref.rows), 1)
    partial = overlap / size
    if ordered and pred.sorted == ref.sorted:
        return Comparison(False, min(0.99, 0.5 * partial), "the right rows in the wrong order")
    if _distinct(pred.sorted) == _distinct(ref.sorted):
        hint = "the right distinct rows, but with the wrong number of repeats (check DISTINCT)"
        return Comparison(False, min(0.99, partial), hint)
    extra = len(pred.rows) - overlap
    missing = len(ref.rows) - overlap
    bits = []
    if extra:
        bits.append(f"{extra} returned row(s) are not in the expected result")
    if missing:
        bits.append(f"{missing} expected row(s) are missing")
    return Comparison(False, min(0.99, partial), "; ".join(bits) or "the values differ")
