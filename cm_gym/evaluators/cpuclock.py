"""CPU time of sandboxed processes, read from ``/proc``: the clock of CPU-time budgets.

A check that is bounded by CPU time rather than wall time gets the same verdict on a quiet and on
a loaded machine: a process that waits for a core does not spend CPU time. `CpuMeter` sums the
CPU time (user + system, plus that of children it reaped) of a changing set of processes since
`start()`; a process that exits keeps its last reading. `starved` tells a run that waited for a
core (the machine was busy: an infrastructure problem) from one that slept or blocked (the
program's own doing), from the scheduler's run-queue delay where the kernel reports it
(``/proc/<pid>/task/<tid>/schedstat``) and from the threads' states otherwise.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable

_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of `pid` (user + system, plus its reaped children's), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _cpu_of(f.read())
    except OSError:
        return None


def _cpu_of(data: bytes) -> float | None:
    """User + system + reaped children's CPU seconds from the text of ``/proc/<pid>/stat``."""
    fields = data.rsplit(b")", 1)[-1].split()
    if len(fields) < 15:
        return None
    try:
        return sum(int(fields[k]) for k in (11, 12, 13, 14)) / _TICKS
    except ValueError:
        return None


def process_clock_id(pid: int) -> int:
    """The kernel's CPU-time clock of process `pid` (Linux: every thread's time, in ns; reaped
    children not included), for ``time.clock_gettime``."""
    return ((~pid) << 3) | 2


class ProcessMeter:
    """`CpuMeter` for one process, cheap enough to read around every call of a killable worker
    (a check of a small instance takes less than a millisecond). With `children` (the default)
    it counts what `process_cpu_s` counts, reaped children included, through a descriptor kept
    open on ``/proc/<pid>/stat`` (one ``pread`` a reading, ~10 us, at the tick's resolution);
    without, it reads the process's CPU clock (one ``clock_gettime``, ~1 us, nanoseconds) and
    falls back to ``/proc`` where the kernel refuses. A process that exits keeps its last reading."""

    def __init__(self, pid: int, *, children: bool = True) -> None:
        self.pid = pid
        self._clock: int | None = None
        self._fd = -1
        if not children:
            with contextlib.suppress(OSError, OverflowError):
                time.clock_gettime(process_clock_id(pid))
                self._clock = process_clock_id(pid)
        if self._clock is None:
            with contextlib.suppress(OSError):
                self._fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        self._base = self._last = 0.0

    def _read(self) -> float | None:
        if self._clock is not None:
            try:
                return time.clock_gettime(self._clock)
            except OSError:
                return None
        if self._fd < 0:
            return process_cpu_s(self.pid)
        try:
            return _cpu_of(os.pread(self._fd, 4096, 0))
        except OSError:
            return None

    def start(self) -> None:
        """Take the baseline: CPU already spent does not count."""
        cpu = self._read()
        self._base = self._last = cpu if cpu is not None else self._last

    def used(self) -> float:
        """CPU seconds since `start()` (samples now)."""
        cpu = self._read()
        if cpu is not None:
            self._last = max(cpu, self._last)
        return self._last - self._base

    def close(self) -> None:
        """Close the descriptor (readings after this open the file each time)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _tids(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def scheduled_s(pid: int) -> tuple[float, float] | None:
    """(seconds on a core, seconds runnable but waiting for one) summed over `pid`'s threads, or
    None when the kernel does not report them."""
    run = wait = 0.0
    seen = False
    for tid in _tids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                parts = f.read().split()
            run += int(parts[0]) / 1e9
            wait += int(parts[1]) / 1e9
            seen = True
        except (OSError, ValueError, IndexError):
            continue
    return (run, wait) if seen else None


def runnable_threads(pid: int) -> int:
    """How many of `pid`'s threads are running or waiting for a core right now (state R)."""
    count = 0
    for tid in _tids(pid):
        fields = _stat_fields(int(tid)) if tid.isdigit() else None
        if fields and fields[0] == b"R":
            count += 1
    return count


class CpuMeter:
    """CPU seconds spent by the processes `pids()` returns, since `start()` (see module doc)."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._sched_base: dict[int, tuple[float, float]] = {}
        self._sched_last: dict[int, tuple[float, float]] = {}

    def start(self) -> None:
        """Take the baseline: CPU already spent does not count."""
        self._base, self._last = {}, {}
        self._sched_base, self._sched_last = {}, {}
        for pid in self._pids():
            cpu = process_cpu_s(pid)
            if cpu is not None:
                self._base[pid] = self._last[pid] = cpu
            sched = scheduled_s(pid)
            if sched is not None:
                self._sched_base[pid] = self._sched_last[pid] = sched

    def used(self) -> float:
        """CPU seconds since `start()` (samples now)."""
        for pid in self._pids():
            cpu = process_cpu_s(pid)
            if cpu is not None:
                self._last[pid] = max(cpu, self._last.get(pid, 0.0))
                self._base.setdefault(pid, 0.0)
        return sum(self._last[p] - self._base[p] for p in self._last)

    def starved(self, wall_s: float) -> bool:
        """Whether the processes spent at least half of `wall_s` on a core or waiting for one (a
        run the machine starved), rather than sleeping or blocked (a run that waits on its own)."""
        pids = list(self._pids())
        wanted = 0.0
        measured = False
        for pid in pids:
            sched = scheduled_s(pid)
            if sched is None:
                continue
            measured = True
            base = self._sched_base.get(pid, (0.0, 0.0))
            wanted += (sched[0] - base[0]) + (sched[1] - base[1])
        if measured:
            return wanted >= 0.5 * wall_s
        return any(runnable_threads(pid) for pid in pids)
