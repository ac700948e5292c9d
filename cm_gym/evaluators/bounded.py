"""Reading values that come from another process without trusting it: plain data only, bounded.

`loads_plain` unpickles bytes that may only build builtin values (None, bool, int, float,
complex, str, bytes, bytearray, list, tuple, dict, set, frozenset): any class lookup is refused,
so no constructor, ``__reduce__`` or ``__setstate__`` of the sender's choosing ever runs. The
byte length is capped before loading (the C unpickler is iterative, so nesting cannot overflow
the stack while loading) and `check_plain` then walks the value without recursion and refuses
values nested deeper than `max_depth` or holding more than `max_nodes` items (shared references
and cycles count every time they are reached), so that comparing, hashing or printing it later
cannot raise `RecursionError` or blow up memory.

`loads_sequences` is stricter, for replies that may only hold tuples, lists and atoms (the wire
tables of `wire.py`): every opcode is checked against an allow-list *before* the C unpickler runs,
so no dict, set or frozenset is ever built from the sender's keys (colliding keys would keep the
C code busy for minutes, where no deadline signal can stop it) and no integer is parsed from text.
The scan is Python code, so a deadline (an alarm) interrupts it.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

from cm_gym.core.types import CmGymError

_LEAVES = (type(None), bool, int, float, complex, str, bytes, bytearray)
_CONTAINERS = (list, tuple, set, frozenset)
_ALLOWED_GLOBALS = {("builtins", "complex"), ("builtins", "bytearray"), ("builtins", "set"),
                    ("builtins", "frozenset")}  # fmt: skip

DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MAX_DEPTH = 100
DEFAULT_MAX_NODES = 5_000_000
#: what pickle.dumps of tuples, lists and atoms emits (protocols 2-5), and nothing else
SEQUENCE_OPCODES = frozenset(
    {"PROTO", "FRAME", "STOP", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET",
     "MARK", "POP", "POP_MARK", "DUP", "EMPTY_LIST", "APPEND", "APPENDS", "LIST", "EMPTY_TUPLE", "TUPLE",
     "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1",
     "LONG4", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "SHORT_BINBYTES", "BINBYTES",
     "BINBYTES8"}
)  # fmt: skip


class UntrustedValueError(CmGymError):
    """A value from another process is malformed, too large, too deep or not plain data."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise UntrustedValueError(f"not plain data: it names {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise UntrustedValueError("not plain data: persistent reference")


def check_plain(
    value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_nodes: int = DEFAULT_MAX_NODES
) -> None:
    """Raise `UntrustedValueError` unless `value` is plain data within the limits (iterative)."""
    if type(value) in _LEAVES:
        return
    budget = max_nodes
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        t = type(item)
        if t in _LEAVES:
            continue
        if depth >= max_depth:
            raise UntrustedValueError(f"nested deeper than {max_depth} levels")
        if t is dict:
            budget -= 2 * len(item)
            children: Any = [x for kv in item.items() for x in kv if type(x) not in _LEAVES]
        elif t in _CONTAINERS:
            budget -= len(item)
            children = [x for x in item if type(x) not in _LEAVES]
        else:
            raise UntrustedValueError(f"not plain data: {t.__name__}")
        if budget < 0:
            raise UntrustedValueError(f"more than {max_nodes} items")
        stack.extend((c, depth + 1) for c in children)


def loads_plain(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Any:
    """Unpickle plain data from an untrusted sender (see module doc); `UntrustedValueError`
    for anything else. Never raises another exception type."""
    if len(data) > max_bytes:
        raise UntrustedValueError(f"{len(data)} bytes, more than the limit of {max_bytes}")
    stream = io.BytesIO(data)
    try:
        value = _PlainUnpickler(stream).load()
    except UntrustedValueError:
        raise
    except RecursionError:  # pragma: no cover - the C unpickler is iterative
        raise UntrustedValueError("nested too deeply") from None
    except MemoryError:
        raise UntrustedValueError("too large to load") from None
    except Exception as exc:  # noqa: BLE001 - any malformed pickle
        raise UntrustedValueError(f"malformed ({type(exc).__name__})") from None
    if stream.read(1):
        raise UntrustedValueError("malformed (data after the end)")
    check_plain(value, max_depth=max_depth, max_nodes=max_nodes)
    return value


def loads_sequences(
    data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> Any:
    """Like `loads_plain`, for pickles of tuples, lists and atoms only (see module doc): any other
    opcode is an `UntrustedValueError` before anything is built."""
    if len(data) > max_bytes:
        raise UntrustedValueError(f"{len(data)} bytes, more than the limit of {max_bytes}")
    try:
        for op, _arg, _pos in pickletools.genops(data):
            if op.name not in SEQUENCE_OPCODES:
                raise UntrustedValueError(f"not a plain sequence: pickle opcode {op.name}")
    except UntrustedValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed pickle
        raise UntrustedValueError(f"malformed ({type(exc).__name__})") from None
    return loads_plain(data, max_bytes=max_bytes, max_depth=max_depth)
