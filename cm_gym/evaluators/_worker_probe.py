"""Functions for checking and benchmarking `Worker` itself (run inside a worker process):
a no-op round trip, state kept between calls, sleeping, allocating, crashing, and what the
worker process has imported (to show that parent packages are not initialised)."""

from __future__ import annotations

import mmap
import os
import sys
import time
from typing import Any

_COUNT = [0]


def echo(value: Any) -> Any:
    """Return `value` unchanged (the round-trip cost)."""
    return value


def count() -> int:
    """How many times this has been called in this worker process (module state persists)."""
    _COUNT[0] += 1
    return _COUNT[0]


def pid() -> int:
    return os.getpid()


def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def spin(seconds: float) -> int:
    """Busy-loop in C for about `seconds` (one long call nothing interrupts)."""
    n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += sum(range(100_000))
    return n


def allocate(mb: int) -> int:
    """Allocate and touch `mb` MB of heap."""
    block = bytearray(mb << 20)
    return len(block)


def touch_shared(mb: int, hold_s: float = 5.0) -> int:
    """Touch `mb` MB of shared anonymous memory (not counted by RLIMIT_DATA), then hold it."""
    area = mmap.mmap(-1, mb << 20)
    for off in range(0, mb << 20, mmap.PAGESIZE):
        area[off] = 1
    time.sleep(hold_s)
    return len(area)


def fail(message: str) -> None:
    raise ValueError(message)


def die(code: int) -> None:
    os._exit(code)


def modules_loaded(*names: str) -> list[str]:
    """Which of `names` are imported in this worker."""
    return [n for n in names if n in sys.modules]


def not_plain() -> Any:
    return object()
