"""The one JSON reader for every file and option cm_gym reads that it did not just write itself
(exported caches, snapshot manifests, changed environments, recorded LLM outputs, evaluator
options, results read back), parsed with size, line-length and nesting caps checked *before* the
parser runs, and the top-level type checked after it (issue 33). `loads` parses text, `load_file`
a regular file (a FIFO, a device or a folder is refused before a byte is read; the size is checked
from ``stat`` first, so a 3 GB sparse file is one error line, not a MemoryError), `iter_lines` a
JSON-lines file one bounded line at a time, `loads_option` a command-line value. A test
(``tests/core/test_bounded_readers.py``) walks the package for any other ``json.load``/``json.loads``.

`json.loads` recurses per nesting level (a deeply nested value is a raw `RecursionError`, and a
value nested a few hundred levels deep makes every later ``json.dumps``/comparison recurse too), so
`loads` first measures the nesting depth without recursion: string literals are cut out with one
regular expression, everything but brackets is dropped (``bytes.translate``), and the depth is the
maximum of the running bracket count (numpy) — linear, C-speed work; a value with no more opening
brackets than the cap (strings included) cannot be nested deeper and skips it. Any failure is one
`BoundedJSONError` naming what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core.paths import DataFileError, read_data_file
from cm_gym.core.types import CmGymError

#: defaults of the caps: a file cm_gym reads (64 MiB), its nesting (cm_gym's own files nest < 20)
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
#: one line of a JSON-lines file
MAX_LINE_BYTES = 8 * 1024 * 1024
#: a command-line value (``--evaluator-option KEY=VALUE``): a scalar or a small list
MAX_OPTION_BYTES = 4096
MAX_OPTION_DEPTH = 4

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class BoundedJSONError(CmGymError, ValueError):
    """Text that is not JSON, or JSON over the size or nesting caps."""


def _openers(data: str | bytes) -> int:
    """How many brackets open in `data`, inside strings too: a bound on its nesting depth that
    costs two C-level counts, so that a small value (a work-memo entry, a manifest) needs no
    `nesting_depth` (whose fixed numpy cost, about 10 us, was most of reading a memo entry)."""
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def nesting_depth(data: str | bytes) -> int:
    """The bracket nesting depth of JSON `data` (brackets inside strings do not count)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    skeleton = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not skeleton:
        return 0
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int32)
    return int(np.cumsum(steps).max())


_NAMES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
          bool: "true or false", type(None): "null"}  # fmt: skip


def _check_type(value: Any, expect: type | tuple[type, ...] | None, what: str) -> Any:
    if expect is None or isinstance(value, expect):
        return value
    wanted = " or ".join(
        dict.fromkeys(_NAMES.get(t, t.__name__) for t in (expect if isinstance(expect, tuple) else (expect,)))
    )
    got = _NAMES.get(type(value), type(value).__name__)
    raise BoundedJSONError(f"{what} is {got}, not {wanted}")


def loads(
    data: str | bytes,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    what: str = "the JSON",
    expect: type | tuple[type, ...] | None = None,
) -> Any:
    """`json.loads(data)` within the caps (see module doc), of type `expect` when given;
    `BoundedJSONError` otherwise."""
    if len(data) > max_bytes:
        raise BoundedJSONError(f"{what} is larger than {max_bytes:,} bytes")
    if _openers(data) > max_depth and nesting_depth(data) > max_depth:
        raise BoundedJSONError(f"{what} is nested deeper than {max_depth} levels")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BoundedJSONError(f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(data)
    except RecursionError:  # pragma: no cover - the depth cap comes first
        raise BoundedJSONError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise BoundedJSONError(f"{what} is not JSON ({str(exc)[:120]})") from None
    return _check_type(value, expect, what)


def load_file(
    path: str | Path,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    what: str | None = None,
    expect: type | tuple[type, ...] | None = dict,
) -> Any:
    """The JSON value in regular file `path` (default: an object) within the caps; a missing or
    unreadable file, a FIFO or device, an oversized file (checked before reading), bad UTF-8, bad
    JSON, too deep a nesting and the wrong type are each one `BoundedJSONError` naming the file."""
    name = what or str(path)
    try:
        text = read_data_file(path, max_bytes)
    except DataFileError as exc:
        raise BoundedJSONError(str(exc)) from None
    except OSError as exc:
        raise BoundedJSONError(f"{name}: cannot read ({exc.strerror or exc})") from None
    return loads(text, max_bytes=max_bytes, max_depth=max_depth, what=name, expect=expect)


def iter_lines(
    text: str,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_depth: int = MAX_DEPTH,
    what: str = "the file",
    expect: type | tuple[type, ...] | None = dict,
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of JSON-lines `text`, each line within the
    caps and of type `expect` (default: an object); the first bad line is a `BoundedJSONError`
    naming it."""
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield (
                lineno,
                loads(
                    line,
                    max_bytes=max_line_bytes,
                    max_depth=max_depth,
                    what=f"{what}: line {lineno}",
                    expect=expect,
                ),
            )


def loads_option(text: str, *, what: str = "the option value") -> Any:
    """A command-line VALUE read as JSON when it is JSON (else the string itself), within small
    caps (`MAX_OPTION_BYTES`, `MAX_OPTION_DEPTH`): ``30000``-deep brackets are one error line."""
    if len(text) > MAX_OPTION_BYTES:
        raise BoundedJSONError(f"{what} is longer than {MAX_OPTION_BYTES} characters")
    if nesting_depth(text) > MAX_OPTION_DEPTH:
        raise BoundedJSONError(f"{what} is nested deeper than {MAX_OPTION_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError:
        return text
