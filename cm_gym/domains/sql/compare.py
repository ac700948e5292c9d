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

*Plain results* skip the tags. When both results hold only exact ``int``, ``str``, ``bytes`` and
NULL values in tuples (no float: only floats are rounded), a value equals another exactly when its
tagged form does, and wherever Python can order two raw rows it orders them as their tagged forms
(the first differing column decides, with the same type on both sides). A comparison that would need
the tags (an int against a text in one column, two NULLs in a bare column) raises ``TypeError``;
then the whole comparison is done again on the tagged forms. So the verdict, the score and the hint
never depend on the path (tested against the tagged path on random results), and a wrong answer's
rows are not copied into tagged tuples on every check (issue 35: the world model's cost beside plain
sqlite3).
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


_new = object.__new__


def _wrong(partial: float, hint: str) -> Comparison:
    """``Comparison(False, partial, hint)`` without the frozen dataclass's `__init__` (one
    ``object.__setattr__`` per field): an equal, ordinary Comparison, built on every wrong answer."""
    out = _new(Comparison)
    out.__dict__.update(correct=False, partial=partial, hint=hint)
    return out


#: the one Comparison of every right answer (frozen: shared)
_RIGHT = Comparison(True, 1.0, "")


@dataclass
class Result:
    """A query result: raw rows, column count, and (lazily) its normalised rows."""

    rows: list[Row]
    ncols: int
    digits: int = 10
    _norm: list[Row] | None = None
    _sorted: list[Row] | None = None
    _plain: bool | None = None
    _plain_sorted: list[Row] | None = None
    #: per form (raw or tagged) the column multisets `_permutations` compares (a kept reference
    #: result computes them once, not on every wrong answer with its shape)
    _columns: dict[bool, list[tuple[int, list[Any]]]] | None = None

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

    @property
    def plain(self) -> bool:
        """Whether the rows are tuples of exact ``int``, ``str``, ``bytes`` and NULL values only
        (module doc: they compare as their tagged forms do). Two C-level passes, no Python loop."""
        if self._plain is None:
            self._plain = (
                set(map(type, self.rows)) <= _TUPLE
                and set(map(type, itertools.chain.from_iterable(self.rows))) <= _PLAIN
            )
        return self._plain

    def rows_as(self, plain: bool) -> list[Row]:
        """The rows themselves (`plain`) or their tagged forms (`norm`)."""
        return self.rows if plain else self.norm

    def sorted_as(self, plain: bool) -> list[Row]:
        """`rows_as(plain)` in order (may raise ``TypeError`` when `plain`: module doc)."""
        if not plain:
            return self.sorted
        if self._plain_sorted is None:
            self._plain_sorted = sorted(self.rows)
        return self._plain_sorted

    def columns_as(self, plain: bool) -> list[tuple[int, list[Any]]]:
        """Each column's `_column` multiset over `rows_as(plain)` (may raise ``TypeError`` when
        `plain`: module doc)."""
        cache = self._columns
        if cache is None:
            cache = self._columns = {}
        out = cache.get(plain)
        if out is None:
            rows = self.rows_as(plain)
            columns = zip(*rows, strict=False) if rows else [()] * self.ncols  # one C-level transpose
            out = cache[plain] = [_column(values, plain) for values in columns]
        return out


_TUPLE = frozenset({tuple})
_PLAIN = frozenset({int, str, bytes, type(None)})


def _overlap(a: list[Row], b: list[Row]) -> int:
    """Size of the multiset intersection of two sorted row lists (one merge walk; none when one
    list ends before the other starts)."""
    if not a or not b or a[-1] < b[0] or b[-1] < a[0]:
        return 0
    i = j = n = 0
    la, lb = len(a), len(b)
    while i < la and j < lb:
        x, y = a[i], b[j]
        if x == y:
            n, i, j = n + 1, i + 1, j + 1
        elif x < y:
            i += 1
        else:
            j += 1
    return n


def _distinct(rows: list[Row]) -> list[Row]:
    """The distinct rows of a sorted list, in order (equal neighbours grouped; ``==`` only)."""
    return [r for r, _ in itertools.groupby(rows)]


def _permutations(pred: Result, ref: Result, plain: bool) -> list[tuple[int, ...]]:
    """Column orders of `pred` whose per-column value multisets match those of `ref`."""
    n = ref.ncols
    sig_ref, sig_pred = ref.columns_as(plain), pred.columns_as(plain)
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


def _column(values: tuple[Any, ...], plain: bool) -> tuple[int, list[Any]]:
    """One column's values as a multiset: (NULLs, the other values in order). Raw values cannot
    order NULLs (``None < None`` raises), so they are counted apart; the tagged ones need not be."""
    if not plain:
        return 0, sorted(values)
    nulls = values.count(None)
    return nulls, sorted([v for v in values if v is not None] if nulls else values)


def _equal(pred_rows: Sequence[Row], ref: Result, ordered: bool, plain: bool) -> bool:
    if ordered:
        return list(pred_rows) == ref.rows_as(plain)
    return sorted(pred_rows) == ref.sorted_as(plain)


def compare(pred: Result, ref: Result, *, ordered: bool) -> Comparison:
    """Compare `pred` with the reference result `ref` (see the module docstring)."""
    if pred.ncols == ref.ncols and pred.rows == ref.rows:
        return _RIGHT
    if not pred.rows and not ref.rows:
        return _RIGHT
    if pred.ncols != ref.ncols:
        return _wrong(0.0, f"wrong number of columns ({pred.ncols} instead of {ref.ncols})")
    if pred.plain and ref.plain:
        try:
            return _compare(pred, ref, ordered, True)
        except TypeError:
            pass  # an order only the tags give (module doc): the tagged path decides
    return _compare(pred, ref, ordered, False)


def _compare(pred: Result, ref: Result, ordered: bool, plain: bool) -> Comparison:
    """`compare` past its shortcuts, on the raw rows (`plain`) or on the tagged ones."""
    if ordered:
        if _equal(pred.rows_as(plain), ref, ordered, plain):
            return _RIGHT
    elif pred.sorted_as(plain) == ref.sorted_as(plain):
        return _RIGHT
    if ref.ncols > 1 and len(pred.rows) == len(ref.rows):
        for perm in _permutations(pred, ref, plain):
            permuted = [tuple(r[j] for j in perm) for r in pred.rows_as(plain)]
            if _equal(permuted, ref, ordered, plain):
                return _RIGHT
    return _explain(pred, ref, ordered, plain)


def _explain(pred: Result, ref: Result, ordered: bool, plain: bool = False) -> Comparison:
    pred_sorted, ref_sorted = pred.sorted_as(plain), ref.sorted_as(plain)
    overlap = _overlap(pred_sorted, ref_sorted)
    size = max(len(pred.rows), len(ref.rows), 1)
    partial = overlap / size
    if ordered and pred_sorted == ref_sorted:
        return _wrong(min(0.99, 0.5 * partial), "the right rows in the wrong order")
    # equal distinct rows need a shared row, the same least and the same greatest row: most wrong
    # answers fail one of these, and then no distinct list is built
    if (
        overlap
        and pred_sorted[0] == ref_sorted[0]
        and pred_sorted[-1] == ref_sorted[-1]
        and _distinct(pred_sorted) == _distinct(ref_sorted)
    ):
        hint = "the right distinct rows, but with the wrong number of repeats (check DISTINCT)"
        return _wrong(min(0.99, partial), hint)
    extra = len(pred.rows) - overlap
    missing = len(ref.rows) - overlap
    bits = []
    if extra:
        bits.append(f"{extra} returned row(s) are not in the expected result")
    if missing:
        bits.append(f"{missing} expected row(s) are missing")
    return _wrong(min(0.99, partial), "; ".join(bits) or "the values differ")
