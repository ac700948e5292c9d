"""Process plumbing for the sandbox: staging the copy, waiting with a deadline while reading the
report pipe, killing a process group, reading capped output."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import IO

from cm_gym.core.types import CmGymError

SCRATCH = "scratch"


class StagingError(CmGymError):
    """A file to stage would land outside the sandbox copy."""


def stage(workdir: Path, files: Mapping[str, str | bytes | Path], uid: int | None) -> None:
    """Write `files` read-only into `workdir`; make its scratch dir writable by the sandbox."""
    os.chmod(workdir, 0o755)
    for rel, content in files.items():
        target = (workdir / rel).resolve()
        if workdir.resolve() not in target.parents:
            raise StagingError(f"file path escapes the sandbox copy: {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        if isinstance(content, Path):
            data = content.read_bytes()
        elif isinstance(content, str):
            data = content.encode()
        else:
            data = content
        target.write_bytes(data)
        os.chmod(target, 0o444)
    for d in [p for p in workdir.rglob("*") if p.is_dir()]:
        os.chmod(d, 0o755)
    scratch = workdir / SCRATCH
    scratch.mkdir(exist_ok=True)
    if uid is not None:
        os.chown(scratch, uid, uid)
        os.chmod(scratch, 0o700)
    else:
        os.chmod(scratch, 0o777)


def read_capped(f: IO[bytes], limit: int) -> tuple[str, bool]:
    """The first `limit` characters written to `f`, and whether there was more."""
    f.seek(0)
    data = f.read(limit * 4 + 4)
    text = data.decode("utf-8", errors="replace")
    truncated = len(text) > limit or bool(f.read(1))
    return text[:limit], truncated


def wait(
    proc: subprocess.Popen[bytes], r_fd: int, deadline: float, cap: int, watch: MemoryWatch | None = None
) -> tuple[bytes, str]:
    """Read the report channel until EOF, then wait for exit; kill on the deadline ("timeout"),
    a report over `cap` bytes ("report-too-large") or memory over the watch's cap ("memory").
    The process's final CPU time is read before it is reaped (`exit_cpu_s`)."""
    chunks: list[bytes] = []
    size = 0
    killed = ""
    if r_fd >= 0:
        while True:
            killed = wait_readable(r_fd, deadline, watch)
            if killed:
                break
            chunk = os.read(r_fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                killed = "report-too-large"
                break
            chunks.append(chunk)
    while not killed and not _exited(proc):
        if time.perf_counter() >= deadline:
            killed = "timeout"
        elif watch is not None and watch.sample():
            killed = "memory"
        else:
            time.sleep(min(0.02, max(0.0, deadline - time.perf_counter())))
    if killed:
        kill_group(proc.pid)
    _exited(proc, block=True)
    proc.wait()
    return b"".join(chunks), killed


def _exited(proc: subprocess.Popen[bytes], block: bool = False) -> bool:
    """Whether `proc` has exited, *without* reaping it, so that its CPU time can still be read
    from ``/proc`` (`exit_cpu_s`); remembered on the object."""
    if getattr(proc, "_cm_cpu_s", None) is not None or proc.returncode is not None:
        return True
    flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    try:
        info = os.waitid(os.P_PID, proc.pid, flags)
    except ChildProcessError:
        return proc.poll() is not None
    if info is None:
        return False
    from cm_gym.evaluators.cpuclock import process_cpu_s

    proc._cm_cpu_s = process_cpu_s(proc.pid) or 0.0  # type: ignore[attr-defined]
    return True


def exit_cpu_s(proc: subprocess.Popen[bytes]) -> float:
    """CPU seconds the process used (user + system, with the children it reaped), read at exit."""
    return float(getattr(proc, "_cm_cpu_s", 0.0) or 0.0)


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (gone already is fine)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _session_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return -1


class MemoryWatch:
    """Per-check memory accounting without cgroups: the resident memory of every process of the
    run (all processes of its fresh uid, else of its session), summed each time `sample` is
    called, so that forks cannot multiply a per-process limit. Shared pages count once per
    process (an over-estimate, never an under-estimate)."""

    def __init__(self, uid: int | None, session: int, cap_bytes: int) -> None:
        self.uid, self.session, self.cap = uid, session, cap_bytes
        self.peak = 0

    def pids(self) -> list[int]:
        from cm_gym.evaluators.isolation import processes_of_uid

        if self.uid is not None:
            return processes_of_uid(self.uid)
        out = []
        with os.scandir("/proc") as entries:
            for entry in entries:
                if entry.name.isdigit() and _session_of(int(entry.name)) == self.session:
                    out.append(int(entry.name))
        return out

    def sample(self) -> bool:
        """Measure; True when the run is over its cap."""
        try:
            total = sum(_rss(pid) for pid in self.pids())
        except OSError:
            return False
        self.peak = max(self.peak, total)
        return total > self.cap


def wait_readable(
    fd: int,
    deadline: float,
    watch: MemoryWatch | None,
    poll_s: float = 0.05,
    over_cpu: Callable[[], bool] | None = None,
) -> str:
    """Wait until `fd` is readable: "" (readable), "timeout", "memory" (the run is over its
    memory cap) or "cpu" (`over_cpu()` says the run spent its CPU budget). The first check comes
    after 20 ms, then every `poll_s`."""
    first = True
    polled = watch is not None or over_cpu is not None
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return "timeout"
        step = min(remaining, 0.02 if first else poll_s) if polled else remaining
        first = False
        ready, _, _ = select.select([fd], [], [], step)
        if ready:
            return ""
        if watch is not None and watch.sample():
            return "memory"
        if over_cpu is not None and over_cpu():
            return "cpu"
