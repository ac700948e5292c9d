"""SQL result comparison: multisets by sorting, never by hashing untrusted values (a follow-up of
issue 27: Python's hashes of -1 and -2 collide, so a ``Counter`` of purpose-built rows is quadratic
in the trusted process). The sorted comparison must give the verdicts, partial scores and hints a
hashing multiset gives on ordinary results."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cm_gym.domains.sql.compare import Result, compare

VALUES = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.sampled_from([1.0, 2.5, -0.0, float("inf"), float("nan"), 1e20]),
    st.sampled_from(["a", "b", "1"]),
    st.sampled_from([b"x", b""]),
)


def _rows(ncols: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    return st.lists(st.tuples(*[VALUES] * ncols), max_size=8)


def _hashing_overlap(pred: Result, ref: Result) -> tuple[int, bool, bool]:
    """What a hashing multiset says (the reference semantics; harmless on these small inputs)."""
    a, b = Counter(pred.norm), Counter(ref.norm)
    return sum((a & b).values()), a == b, set(a) == set(b)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda n: st.tuples(st.just(n), _rows(n), _rows(n))), st.booleans())
def test_sorted_multisets_agree_with_hashing_ones(case: tuple[int, list, list], ordered: bool) -> None:
    ncols, pred_rows, ref_rows = case
    pred, ref = Result(pred_rows, ncols), Result(ref_rows, ncols)
    got = compare(pred, ref, ordered=ordered)
    overlap, same, same_distinct = _hashing_overlap(pred, ref)
    if not ordered and same:
        assert got.correct and got.partial == 1.0
    if not got.correct:
        size = max(len(pred_rows), len(ref_rows), 1)
        if ordered and same:
            assert got.hint == "the right rows in the wrong order"
            assert got.partial == pytest.approx(min(0.99, 0.5 * overlap / size))
        else:
            assert got.partial == pytest.approx(min(0.99, overlap / size))
            assert ("wrong number of repeats" in got.hint) == (same_distinct and pred.ncols == ref.ncols)


def test_nan_and_mixed_types_sort_without_error() -> None:
    rows = [(float("nan"), "a"), (None, b"x"), (1, 2.5), ("1", None)]
    assert compare(Result(rows[::-1], 2), Result(rows, 2), ordered=False).correct
    assert not compare(Result(rows[:3], 2), Result(rows, 2), ordered=False).correct


@pytest.mark.timeout(120)  # a hang guard: a hashing multiset needs many minutes here
def test_rows_built_to_collide_in_hashes_compare_in_n_log_n() -> None:
    # 10,000 distinct rows (the row cap) of -1 / -2: every row has the same hash
    rows = [tuple(-1 if (i >> b) & 1 else -2 for b in range(14)) for i in range(10_000)]
    assert len({hash(r) for r in rows[:64]}) == 1  # the probe really collides
    got = compare(Result(rows[::-1] + [(0,) * 14], 14), Result(rows + [(3,) * 14], 14), ordered=False)
    assert not got.correct and "1 expected row(s) are missing" in got.hint
    assert compare(Result(rows[::-1], 14), Result(rows, 14), ordered=False).correct


def test_norm_rows_equals_norm_value_on_every_type() -> None:
    """The inline fast path for ints and text gives exactly `norm_value`'s tags and values."""
    from cm_gym.domains.sql.compare import norm_rows, norm_value

    class Text(str):
        pass

    class Number(int):
        pass

    row = (None, True, False, 0, -1, 2**70, 1.0, 1.5, -0.0, float("inf"), 1e19, 3.14159265358979,
           "a", "", b"x", bytearray(b"y"), Text("q"), Number(5))  # fmt: skip
    for digits in (3, 10):
        fast = norm_rows([row, row[::-1]], digits)
        slow = [tuple(norm_value(v, digits) for v in r) for r in (row, row[::-1])]
        assert fast == slow
        assert [type(v) for r in fast for _, v in r] == [type(v) for r in slow for _, v in r]
    nan = norm_rows([(float("nan"),)], 10)
    assert nan == [(norm_value(float("nan"), 10),)]


# -- the plain path (rows compared untagged) -----------------------------------------------------
PLAIN_VALUES = st.one_of(
    st.none(), st.integers(-3, 3), st.sampled_from([2**70, -(2**70)]), st.sampled_from(["a", "b", "1", ""]),
    st.sampled_from([b"x", b"", b"1"]),
)  # fmt: skip
#: values only the tags compare right: rounded floats (0.1 + 0.2 equals 0.3), a NaN built afresh
#: each time (equal to another NaN only when tagged), a bool (1 when tagged)
ODD_VALUES = st.one_of(st.sampled_from([0.1 + 0.2, 0.3, 1.0, True]), st.builds(float, st.just("nan")))
ANY_VALUES = st.one_of(PLAIN_VALUES, PLAIN_VALUES, PLAIN_VALUES, ODD_VALUES)


def _tagged(pred: Result, ref: Result, ordered: bool) -> tuple[bool, float, str]:
    """What the tagged path alone says (fresh copies: no cached state shared with the other path)."""
    from cm_gym.domains.sql import compare as cmp

    a, b = Result(list(pred.rows), pred.ncols), Result(list(ref.rows), ref.ncols)
    if a.ncols == b.ncols and a.rows == b.rows or (not a.rows and not b.rows):
        return True, 1.0, ""
    if a.ncols != b.ncols:
        got = compare(a, b, ordered=ordered)
    else:
        got = cmp._compare(a, b, ordered, False)
    return got.correct, got.partial, got.hint


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(*[ANY_VALUES] * n), max_size=7),
            st.lists(st.tuples(*[ANY_VALUES] * n), max_size=7),
        )  # fmt: skip
    ),
    st.booleans(),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_plain_path_gives_the_tagged_verdict(case: tuple, ordered: bool, near: bool, rnd: Any) -> None:
    """Same verdict, score and hint as the tagged path on results of ints, texts, bytes and NULLs
    mixed within columns (where the raw rows cannot be ordered), on shuffled and permuted copies,
    and with values that need the tags (rounded floats, NaNs, bools) on either side."""
    ncols, pred_rows, other = case
    ref_rows = list(pred_rows) if near else other
    if near and rnd.random() < 0.7:  # a near copy: shuffled, a row repeated, columns swapped
        rnd.shuffle(ref_rows)
        if ref_rows and rnd.random() < 0.5:
            ref_rows[rnd.randrange(len(ref_rows))] = ref_rows[0]
        if ncols > 1 and rnd.random() < 0.3:
            ref_rows = [r[::-1] for r in ref_rows]
    pred, ref = Result(pred_rows, ncols), Result(ref_rows, ncols)
    got = compare(pred, ref, ordered=ordered)
    assert (got.correct, got.partial, got.hint) == _tagged(pred, ref, ordered)


def test_plain_results_are_compared_without_tags() -> None:
    """Two results of SQLite's int/text/blob/NULL values are compared on their rows: no tagged copy
    is built (the speed path exists); a float, a bool or a list row sends both to the tagged path."""
    pred = Result([(1, "a", None), (2, "b", b"z")], 3)
    ref = Result([(2, "b", b"z"), (3, "c", None)], 3)
    got = compare(pred, ref, ordered=False)
    assert not got.correct and got.partial == 0.5
    assert pred.plain and ref.plain and pred._norm is None and ref._norm is None
    for odd in ([(1.0, "a", None)], [(True, "a", None)], [[1, "a", None]]):
        assert not Result(odd, 3).plain
    mixed = Result([(1,), ("1",), (None,)], 1)  # int and text in one column: only the tags order them
    assert compare(mixed, Result([("1",), (None,), (1,)], 1), ordered=False).correct
    assert mixed._norm is not None


@pytest.mark.parametrize("value", [1, "a", b"a", None, 1.5])
def test_repeats_hint_on_both_paths(value: Any) -> None:
    """A duplicated row is named as a repeat (DISTINCT) with the overlap as its score, whether the
    rows are compared raw (int, text, blob, NULL) or tagged (float)."""
    got = compare(Result([(value, 0), (value, 0), (2, 0)], 2), Result([(2, 0), (value, 0)], 2), ordered=False)
    assert not got.correct and "wrong number of repeats" in got.hint and got.partial == pytest.approx(2 / 3)
    missing = compare(Result([(value, 0)], 2), Result([(2, 0), (value, 0)], 2), ordered=True)
    assert missing.hint == "1 expected row(s) are missing" and missing.partial == 0.5


@pytest.mark.parametrize("partial", [False, True])
def test_scored_outcomes_equal_ones_built_by_the_dataclass(partial: bool) -> None:
    """`scored` builds its Outcome without the frozen dataclass's __init__ (a hot path): the
    result is an ordinary Outcome, equal, hashed and shown as one built the usual way."""
    import dataclasses

    from cm_gym.core.types import Outcome
    from cm_gym.domains.sql.outcomes import scored

    pred, ref = Result([(1, "a"), (1, "a")], 2), Result([(1, "a")], 2)
    budget = {"budget_kind": "sqlite-vm-steps", "budget_limit": 10, "budget_used": 3}
    got = scored(pred, ref, False, compare(pred, ref, ordered=False), partial, budget)
    details = {"rows": 2, "cols": 2, "expected_rows": 1, "expected_cols": 2, "ordered": False, **budget,
               "graded": 0.5}  # fmt: skip
    feedback = ("Wrong result: the query returned 2 row(s) x 2 column(s); the expected result has 1 row(s) x "
                "2 column(s). Hint: the right distinct rows, but with the wrong number of repeats (check DISTINCT).")  # fmt: skip
    usual = Outcome(0.5 if partial else 0.0, False, feedback, reason="wrong result", details=details)
    assert type(got) is Outcome and got == usual and hash(got) == hash(usual) and repr(got) == repr(usual)
    assert dataclasses.asdict(got) == dataclasses.asdict(usual) and list(got.details) == list(details)
    right = scored(ref, ref, True, None, partial)
    assert right == Outcome(1.0, True, "Correct: the query returns the expected result (1 row(s) x 2 column(s)).",
                            details={"rows": 1, "cols": 2, "expected_rows": 1, "expected_cols": 2, "ordered": True})  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.score = 1.0  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3).flatmap(lambda n: st.tuples(st.just(n), _rows(n))))
def test_column_multisets_are_each_columns_values_and_kept(case: tuple[int, list]) -> None:
    """`Result.columns_as` (what the column-permutation search compares) is, per column, the
    NULL count and the other values in order (tagged: every value in order), computed once per
    form, and one empty multiset per column on an empty result."""
    from cm_gym.domains.sql.compare import norm_rows

    ncols, rows = case
    result = Result(rows, ncols)
    tagged = result.columns_as(False)
    assert tagged == [(0, sorted(r[i] for r in norm_rows(rows, 10))) for i in range(ncols)]
    assert result.columns_as(False) is tagged
    if result.plain:
        try:
            raw = result.columns_as(True)
        except TypeError:
            return  # an int and a text in one column: only the tags order them (module doc)
        for i, (nulls, values) in enumerate(raw):
            column = [r[i] for r in rows]
            assert nulls == column.count(None) and values == sorted(v for v in column if v is not None)
    assert Result([], ncols).columns_as(True) == [(0, [])] * ncols


def test_overlap_of_sorted_rows_is_the_multiset_intersection() -> None:
    """The merge walk, with its shortcut for lists whose ranges do not meet, counts what a
    multiset intersection counts (repeats included)."""
    import random

    from cm_gym.domains.sql.compare import _overlap

    rnd = random.Random(7)
    for _ in range(500):
        a = sorted((rnd.randint(0, 9), rnd.choice("ab")) for _ in range(rnd.randint(0, 6)))
        b = sorted(
            (rnd.randint(0, 9) + rnd.choice([0, 0, 12]), rnd.choice("ab")) for _ in range(rnd.randint(0, 6))
        )
        assert _overlap(a, b) == _overlap(b, a) == sum((Counter(a) & Counter(b)).values())
