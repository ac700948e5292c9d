"""Replies built to keep the trusted judge busy in C code, where its deadline cannot interrupt it
(issue 27): colliding hash keys in dicts, sets and frozensets, tuple keys whose hash costs
exponential work, deep tuple chains, huge integers, and dicts or sets inside the reply's pickle.
Each is refused with one reason, by `wire.decode` / `bounded.loads_sequences` (unit level, fuzzed)
and end to end by the judge against a sandboxed program that forges its own replies."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cm_gym.evaluators import wire
from cm_gym.evaluators.bounded import UntrustedValueError, loads_sequences
from cm_gym.evaluators.sandbox import Limits, Sandbox
from cm_gym.evaluators.testrun import Case, TestSuite, encode_expected, run_suite

M = 2**61 - 1  # hash(k * M) == 0 for every int k: every key collides
N = 200_000


def _colliding(kind: str) -> list:
    ints = tuple(k * M for k in range(1, N + 1))
    if kind == "d":
        return [("d", tuple(x for k in ints for x in (k, 0)))]
    if kind == "tuple_keys":  # tuples of colliding ints collide too
        return [("s", tuple((i,) for i in range(1, N + 1))), *[("t", (k,)) for k in ints]]
    return [(kind, ints)]


def _dag(depth: int) -> list:
    """A set whose one key is a tuple DAG: ((x, x), (x, x)) … hashing it costs 2**depth."""
    return [("s", ((1,),))] + [("t", ((i + 1,), (i + 1,))) for i in range(1, depth + 1)] + [("t", ())]


TABLES = {
    "colliding_dict": (_colliding("d"), "share a hash value"),
    "colliding_set": (_colliding("s"), "share a hash value"),
    "colliding_frozenset": (_colliding("f"), "share a hash value"),
    "colliding_tuple_keys": (_colliding("tuple_keys"), "share a hash value"),
    "exponential_hash": (_dag(80), "too much work to hash"),
    "deep_tuples": ([("t", ((i + 1,),)) for i in range(100_000)] + [("t", ())], "nested deeper"),
    "huge_int": ([("l", (1 << 1_000_000,))], "too large"),
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_decoding_refuses_work_a_deadline_cannot_stop(name: str) -> None:
    table, why = TABLES[name]
    with pytest.raises(wire.WireError, match=why):
        wire.decode(table, ((0,),))


def test_honest_values_still_decode() -> None:
    value = [{(1, 2): {3, 4}, "k": frozenset({(5,), (6,)})}, {-1: 1, -2: 2}, (((),),), 10**300]
    table, roots, _ = wire.encode([value])
    assert wire.decode(table, roots) == (value,)


def test_reply_pickles_may_hold_only_tuples_lists_and_atoms() -> None:
    ok = pickle.dumps(("ok", [("l", (1, "a", 2.5, b"x", None, True, 10**40))], ((0,),)), protocol=4)
    assert loads_sequences(ok)[0] == "ok"
    for hostile in ({1: 2}, {1, 2}, frozenset({1}), [{"a": 1}], 1j, bytearray(b"x")):
        with pytest.raises(UntrustedValueError, match="opcode"):
            loads_sequences(pickle.dumps(("ok", hostile, ()), protocol=4))
    # a protocol-0 integer in text form, and a set of colliding keys written by hand
    with pytest.raises(UntrustedValueError):
        loads_sequences(b"I" + b"9" * 100_000 + b"\n.")
    with pytest.raises(UntrustedValueError, match="EMPTY_SET"):
        loads_sequences(_raw_colliding_set(N))


def _raw_colliding_set(n: int) -> bytes:
    body = b"".join(b"\x8a\x0c" + (k * M).to_bytes(12, "little", signed=True) for k in range(1, n))
    return b"\x80\x04\x8f(" + body + b"\x90."


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_property_any_reply_bytes_are_refused_or_plain_sequences(data: bytes) -> None:
    try:
        value = loads_sequences(data)
    except UntrustedValueError:
        return
    stack = [value]
    while stack:
        item = stack.pop()
        assert type(item) in (tuple, list, type(None), bool, int, float, str, bytes)
        if type(item) in (tuple, list):
            stack.extend(item)


# -- end to end: a program that forges its replies, judged in the sandbox ------------------------
_FORGE = """
import sys, _cm_wire, _cm_frames
{setup}
def _forged(roots, known=(), classes=None, **kw):
    return TABLE, ((0,),), []
def f(x):
    {body}
"""
_PROGRAMS = {
    "colliding_dict": ("TABLE = [('d', tuple(v for k in range(1, 50001) for v in (k * (2**61 - 1), 0)))]",
                       "_cm_wire.encode = _forged\n    return 0"),
    "exponential_hash": ("TABLE = [('s', ((1,),))] + [('t', ((i + 2,), (i + 2,))) for i in range(80)] + [('t', ())]",
                         "_cm_wire.encode = _forged\n    return 0"),
    "deep_tuples": ("TABLE = [('t', ((i + 1,),)) for i in range(20000)] + [('t', ())]",
                    "_cm_wire.encode = _forged\n    return 0"),
    "huge_int": ("TABLE = [('l', (1 << 1000000,))]", "_cm_wire.encode = _forged\n    return 0"),
    "dict_in_pickle": ("TABLE = [('l', ({'a': 1},))]", "_cm_wire.encode = _forged\n    return 0"),
    "raw_colliding_set": (
        "M = 2**61 - 1\nBODY = b''.join(b'\\x8a\\x0c' + (k * M).to_bytes(12, 'little', signed=True) for k in range(1, 50000))",
        "_cm_frames.write_frame(int(sys.argv[2]), b'\\x80\\x04\\x8f(' + BODY + b'\\x90.')\n    import time\n    time.sleep(30)",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(Limits(wall_s=20.0, cpu_s=20.0, memory_mb=1024, max_procs=16))


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_the_judge_refuses_forged_replies_within_its_deadline(sandbox: Sandbox, name: str) -> None:
    setup, body = _PROGRAMS[name]
    suite = TestSuite(mode="cases", program_path="solution.py", module="solution", function="f",
                      cases=(Case("c0", "f(*input_data)", [1], encode_expected(0)),), per_test_timeout=3.0)  # fmt: skip
    run = run_suite(sandbox, suite, _FORGE.format(setup=setup, body=body))
    (result,) = run.results
    # refused with its reason, or (on a loaded machine) stopped by the judge's own per-test
    # alarm: never passed, never the 30 s run budget, never a judge that stopped answering
    assert not result.passed and result.status in ("error", "fail", "timeout"), (name, result)
    assert result.status != "timeout" or "timed out after 3s" in result.message, (name, result)
