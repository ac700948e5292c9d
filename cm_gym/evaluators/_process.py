"""Process plumbing for the sandbox: staging the copy, waiting with a deadline while reading the
report pipe, killing a process group, reading capped output."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import IO

from cm_gym.types import CmGymError

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


def wait(proc: subprocess.Popen[bytes], r_fd: int, deadline: float, cap: int) -> tuple[bytes, str]:
    """Read the report channel until EOF, then wait for exit; kill on the deadline."""
    chunks: list[bytes] = []
    size = 0
    killed = ""
    if r_fd >= 0:
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                killed = "timeout"
                break
            ready, _, _ = select.select([r_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(r_fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                killed = "report-too-large"
                break
            chunks.append(chunk)
    if not killed:
        try:
            proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            killed = "timeout"
    if killed:
        kill_group(proc.pid)
        proc.wait()
    return b"".join(chunks), killed


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (gone already is fine)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
