"""By-value transfer between the judge and the program: identity, cycles, deep structures and
copy-restore survive; received tables (untrusted) are decoded without recursion and anything
malformed is one `WireError` (fuzzed), as is any untrusted pickle for `loads_plain` (fuzzed)."""

from __future__ import annotations

import collections
import contextlib
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.evaluators import wire
from cm_gym.evaluators.bounded import UntrustedValueError, loads_plain


class Node:
    def __init__(self, value: object = None, successor: object = None) -> None:
        self.value, self.successor = value, successor


CLASSES = {wire.class_key(Node): Node}


def round_trip(*values: object) -> tuple[object, ...]:
    table, roots, _ = wire.encode(list(values))
    table, roots = loads_plain(pickle.dumps((table, roots)), max_depth=8)
    return wire.decode(table, roots, classes=CLASSES)


def test_plain_values_keep_their_types() -> None:
    value = [1, 2.5, "s", b"b", None, True, (1, (2,)), {1: {"a"}}, frozenset({3}), 1j, bytearray(b"x"),
             collections.deque([1]), collections.OrderedDict(a=1)]  # fmt: skip
    (back,) = round_trip(value)
    assert back == [*value[:-2], collections.deque([1]), {"a": 1}]
    assert [type(x) for x in back][:-1] == [type(x) for x in value][:-1]


def test_sharing_cycles_and_deep_chains_survive_without_recursion() -> None:
    shared = [1]
    cyclic: list = []
    cyclic.append(cyclic)
    head = None
    for i in range(20_000):
        head = Node(i, head)
    pair, cyc, chain = round_trip([shared, shared], cyclic, head)
    assert pair[0] is pair[1] and cyc[0] is cyc
    count, node = 0, chain
    while node is not None:
        count, node = count + 1, node.successor
    assert count == 20_000 and type(chain) is Node


def test_copy_restore_updates_the_senders_objects_in_place() -> None:
    n1, n2 = Node(1), Node(2)
    n2.successor = n1
    args = [n2, [5, 6]]
    table, roots, objects = wire.encode(args)
    # the receiving side: decode, mutate (reverse the list, relink), send back against `known`
    got, got_objects = wire.decode_all(table, roots)
    a, b = got
    a.successor.successor, a.successor = a, None
    b.reverse()
    back_table, back_roots, _ = wire.encode([a.__dict__ and got[0]], known=got_objects)
    (result,) = wire.decode(back_table, back_roots, existing=objects, classes=CLASSES)
    assert result is n2 and n1.successor is n2 and n2.successor is None and args[1] == [6, 5]


def test_objects_of_unexpected_classes_are_refused() -> None:
    class Liar:
        def __eq__(self, other: object) -> bool:
            return True

    with pytest.raises(wire.WireError):
        wire.encode([Liar()], classes={wire.class_key(Node)})
    table, roots, _ = wire.encode([Liar()])
    with pytest.raises(wire.WireError, match="cannot be checked"):
        wire.decode(table, roots, classes=CLASSES)
    with pytest.raises(wire.WireError):
        wire.encode([lambda: 1])


slot = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.tuples(st.integers(-2, 8)))
entry = st.tuples(
    st.sampled_from(["l", "t", "s", "f", "d", "q", "i", "c", "b", "o", "z"]),
    st.one_of(st.tuples(), st.lists(slot, max_size=4).map(tuple),
              st.tuples(st.sampled_from([wire.class_key(Node), "x:y"]), st.tuples(st.integers(-1, 6)))),
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry, max_size=7), st.lists(slot, max_size=3).map(tuple))
def test_decoding_any_table_raises_only_wire_errors(table: list, roots: tuple) -> None:
    with contextlib.suppress(wire.WireError):
        wire.decode(table, roots, classes=CLASSES)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_loading_any_bytes_raises_only_untrusted_value_errors(data: bytes) -> None:
    with contextlib.suppress(UntrustedValueError):
        loads_plain(b"\x80\x04" + data)
