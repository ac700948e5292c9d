"""JSON from files cm_gym did not write itself (exported caches, snapshot manifests), parsed with
size and nesting caps checked *before* the parser runs.

`json.loads` recurses per nesting level (a deeply nested value is a raw `RecursionError`, and a
value nested a few hundred levels deep makes every later ``json.dumps``/comparison recurse too), so
`loads` first measures the nesting depth without recursion: string literals are cut out with one
regular expression, everything but brackets is dropped (``bytes.translate``), and the depth is the
maximum of the running bracket count (numpy) — linear, C-speed work. Any failure is one
`BoundedJSONError` naming what is wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from cm_gym.core.types import CmGymError

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class BoundedJSONError(CmGymError, ValueError):
    """Text that is not JSON, or JSON over the size or nesting caps."""


def nesting_depth(data: str | bytes) -> int:
    """The bracket nesting depth of JSON `data` (brackets inside strings do not count)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    skeleton = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not skeleton:
        return 0
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int32)
    return int(np.cumsum(steps).max())


def loads(data: str | bytes, *, max_bytes: int, max_depth: int, what: str = "the JSON") -> Any:
    """`json.loads(data)` within the caps (see module doc); `BoundedJSONError` otherwise."""
    if len(data) > max_bytes:
        raise BoundedJSONError(f"{what} is larger than {max_bytes:,} bytes")
    if nesting_depth(data) > max_depth:
        raise BoundedJSONError(f"{what} is nested deeper than {max_depth} levels")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BoundedJSONError(f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(data)
    except RecursionError:  # pragma: no cover - the depth cap comes first
        raise BoundedJSONError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise BoundedJSONError(f"{what} is not JSON ({str(exc)[:120]})") from None
