"""An artificial CPU hog for the load-independence test and benchmark (issue 25): processes that
spin on every core, so that every other process gets a fraction of a core and its wall time grows
(with ``per_core=2`` about three times on an otherwise idle machine), while its CPU time does not.
`CpuHog.tripling()` sizes the hog from the current load average so that wall times about triple
on a machine that is already busy. The spinners die with the process that started them.

    with CpuHog(per_core=2) as hog:
        ...  # everything here runs on a machine three times as busy
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress

_SPIN = (
    "import ctypes, signal\n"
    "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\nexcept Exception:\n    pass\n"  # PR_SET_PDEATHSIG
    "while True:\n    pass\n"
)


class CpuHog:
    """`per_core` spinning processes per core (`os.cpu_count()`), started on enter, killed on exit."""

    def __init__(self, per_core: int = 2, cores: int | None = None, *, total: int | None = None) -> None:
        self.n = max(1, total if total is not None else per_core * (cores or os.cpu_count() or 1))
        self.procs: list[subprocess.Popen[bytes]] = []

    @classmethod
    def tripling(cls) -> CpuHog:
        """A hog of twice as many spinners as the machine already runs (at least two per core):
        every other process's share of the cores drops to about a third."""
        cores = os.cpu_count() or 1
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return cls(total=2 * max(cores, round(load)))

    def start(self) -> CpuHog:
        for _ in range(self.n):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        return self

    def stop(self) -> None:
        for proc in self.procs:
            with suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self.procs = []

    def __enter__(self) -> CpuHog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
