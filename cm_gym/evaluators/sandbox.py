"""Run an untrusted command on a throw-away copy of some files, with limits and isolation.

`Sandbox.run(argv, files)` writes `files` into a fresh temporary directory (read-only to the
sandboxed process, except its ``scratch/`` dir, which is also its HOME and TMPDIR), starts `argv`
there in a new session with a scrubbed environment, rlimits (address space, CPU, processes, file
size, open files) and whatever isolation layers the platform allows (see `isolation.py`: a fresh
uid when we are root, a network namespace, private read-only temp dirs and a small tmpfs as
scratch). It enforces a wall-clock timeout, kills the whole process group (and, with a fresh uid,
every process of that uid, so a daemonised child cannot survive) afterwards, captures
stdout/stderr truncated, optionally reads a *report channel* (a pipe whose write end only the
child receives, so printing to stdout cannot fake a report), and deletes the copy.

Which layers work is probed once per process (`probe_isolation`), strongest first, and every
`SandboxResult` says what was applied. What is isolated where (honestly):

- root (as in CI): fresh uid (cannot write, delete or signal anything outside its copy's scratch
  dir; ``RLIMIT_NPROC`` caps fork/thread bombs), network namespace (no route anywhere, not even
  to the host's loopback), private temp dirs, rlimits. Still possible: reading world-readable
  files, seeing other processes in /proc, using CPU and memory up to the limits. There is no
  seccomp filter, no PID namespace and no cgroup.
- not root: no fresh uid, so the code runs as the caller: it could read and write the caller's
  files and signal the caller's processes; only the limits and, if the kernel allows
  unprivileged user namespaces, the network namespace and private temp dirs apply, and the
  process limit counts all of the caller's processes.
- ``isolation="none"``: limits and a new session only (for measuring the overhead).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cm_gym.evaluators._process import SCRATCH, StagingError, kill_group, read_capped, stage, wait
from cm_gym.evaluators.isolation import (
    IsolationPlan,
    RLimits,
    kill_uid,
    libc_available,
    make_preexec,
    processes_of_uid,
)
from cm_gym.types import CmGymError

logger = logging.getLogger(__name__)

_UID_BASE = 1_800_000_000
_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}


class SandboxError(CmGymError):
    """The sandbox could not be set up (no usable interpreter, strict isolation unavailable)."""


class ToolNotFoundError(CmGymError):
    """An external tool a world model needs (e.g. the `dafny` verifier) is not installed."""


@dataclass(frozen=True)
class Limits:
    """Budgets of one sandboxed run."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 512
    max_procs: int = 32
    max_file_mb: int = 8
    open_files: int = 256
    output_chars: int = 20_000
    report_bytes: int = 4 << 20


@dataclass(frozen=True)
class SandboxResult:
    """What happened. `killed` is "" or why the run was stopped ("timeout", "report-too-large");
    `signal` is the terminating signal number (0 if it exited); `isolation` names the layers."""

    returncode: int | None
    stdout: str
    stderr: str
    report: bytes
    timed_out: bool
    killed: str
    signal: int
    wall_s: float
    isolation: str
    strays_killed: int = 0
    output_truncated: bool = False
    uid: int | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.killed

    def describe_exit(self) -> str:
        """One phrase for feedback: how the process ended."""
        if self.killed:
            return f"killed ({self.killed})"
        if self.signal:
            name = signal.Signals(self.signal).name if self.signal in signal.valid_signals() else ""
            hint = {"SIGXCPU": "CPU limit", "SIGKILL": "killed", "SIGSEGV": "crashed"}.get(name, name)
            return f"terminated by signal {self.signal} ({hint})"
        return f"exit status {self.returncode}"


# -- probing ------------------------------------------------------------------------------------
_PROBE_LOCK = threading.Lock()
_PROBED: dict[str, tuple[IsolationPlan, str]] = {}


def _interpreter_candidates() -> list[str]:
    seen: list[str] = []
    base = getattr(sys, "_base_executable", None) or sys.executable
    for cand in (base, sys.executable, "/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3")):
        if cand:
            real = os.path.realpath(cand)
            if os.path.isfile(real) and real not in seen:
                seen.append(real)
    return seen


def _plans(mode: str) -> list[IsolationPlan]:
    if mode == "none" or not libc_available() or not sys.platform.startswith("linux"):
        return [IsolationPlan()]
    if os.geteuid() == 0:
        uid = fresh_uid()
        strong = [
            IsolationPlan(net=True, mount=True, uid=uid),
            IsolationPlan(net=True, uid=uid),
            IsolationPlan(uid=uid),
        ]
        weak = [IsolationPlan(net=True), IsolationPlan()]
    else:
        strong = []
        weak = [IsolationPlan(userns=True, net=True, mount=True), IsolationPlan(userns=True, net=True)]
        weak.append(IsolationPlan())
    return strong if mode == "strict" else strong + weak


def probe_isolation(mode: str = "auto") -> tuple[IsolationPlan, str]:
    """The strongest isolation plan that works here, and a Python interpreter usable under it.

    `mode`: "auto" (strongest available, falling back to limits only), "strict" (fresh uid
    required, else `SandboxError`) or "none" (limits only). Cached per process.
    """
    with _PROBE_LOCK:
        if mode in _PROBED:
            return _PROBED[mode]
        for plan in _plans(mode):
            for python in _interpreter_candidates():
                if _probe_one(plan, python):
                    logger.info("sandbox isolation: %s (python %s)", plan.describe(), python)
                    _PROBED[mode] = (plan, python)
                    return plan, python
        if mode == "strict":
            raise SandboxError("strict sandbox isolation (fresh uid, root only) is not available here")
        raise SandboxError("no Python interpreter runs inside the sandbox")


def _probe_one(plan: IsolationPlan, python: str) -> bool:
    code = "import os;open('scratch/p','w').write('x');print(os.getuid())"
    try:
        res = _execute(
            [python, "-I", "-S", "-c", code],
            {"probe.txt": "x"},
            Limits(wall_s=10, cpu_s=5),
            plan,
            b"",
            False,
            None,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("sandbox probe %s with %s failed: %s", plan.describe(), python, exc)
        return False
    expected = str(plan.uid) if plan.uid is not None else None
    good = res.ok and (expected is None or res.stdout.strip() == expected)
    if not good:
        logger.debug(
            "sandbox probe %s with %s: %s %s", plan.describe(), python, res.describe_exit(), res.stderr
        )
    return good


def fresh_uid() -> int:
    """An unused uid for one run (nothing on the machine belongs to it)."""
    while True:
        uid = _UID_BASE + secrets.randbelow(1 << 24)
        if not processes_of_uid(uid, include_zombies=True):
            return uid


# -- running -----------------------------------------------------------------------------------
def _execute(
    argv: Sequence[str],
    files: Mapping[str, str | bytes | Path],
    limits: Limits,
    plan: IsolationPlan,
    stdin: bytes,
    report: bool,
    env: Mapping[str, str] | None,
) -> SandboxResult:
    workdir = Path(tempfile.mkdtemp(prefix="cm_gym_sbx_"))
    r_fd = w_fd = -1
    try:
        stage(workdir, files, plan.uid)
        procs = limits.max_procs
        if plan.uid is None and os.geteuid() != 0:
            procs += len(processes_of_uid(os.getuid()))
        rl = RLimits(
            address_space=limits.memory_mb << 20,
            cpu_seconds=max(1, int(round(limits.cpu_s))),
            processes=procs,
            file_size=limits.max_file_mb << 20,
            open_files=limits.open_files,
        )
        scratch = str(workdir / SCRATCH)
        full_env = dict(_BASE_ENV, HOME=scratch, TMPDIR=scratch)
        full_env.update(env or {})
        pass_fds: tuple[int, ...] = ()
        if report:
            r_fd, w_fd = os.pipe()
            pass_fds = (w_fd,)
        argv = [a.replace("{report_fd}", str(w_fd)) for a in argv]
        with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=full_env,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=out_f,
                stderr=err_f,
                pass_fds=pass_fds,
                start_new_session=True,
                preexec_fn=make_preexec(plan, rl, str(workdir)),
            )
            if w_fd >= 0:
                os.close(w_fd)
                w_fd = -1
            if stdin and proc.stdin is not None:
                try:
                    proc.stdin.write(stdin)
                    proc.stdin.close()
                except OSError:
                    pass
            deadline = t0 + limits.wall_s
            report_bytes, killed = wait(proc, r_fd, deadline, limits.report_bytes)
            wall = time.perf_counter() - t0
            kill_group(proc.pid)
            strays = kill_uid(plan.uid) if plan.uid is not None else 0
            stdout, t1 = read_capped(out_f, limits.output_chars)
            stderr, t2 = read_capped(err_f, limits.output_chars)
        rc = proc.returncode
        return SandboxResult(
            returncode=rc,
            stdout=stdout,
            stderr=stderr,
            report=report_bytes,
            timed_out=killed == "timeout",
            killed=killed,
            signal=-rc if rc is not None and rc < 0 else 0,
            wall_s=wall,
            isolation=plan.describe(),
            strays_killed=strays,
            output_truncated=t1 or t2,
            uid=plan.uid,
        )
    finally:
        for fd in (r_fd, w_fd):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)


class Sandbox:
    """Runs commands on throw-away copies of files under `limits` and the strongest isolation
    this platform allows (`isolation`: "auto", "strict" or "none"; see `probe_isolation`)."""

    def __init__(self, limits: Limits | None = None, *, isolation: str = "auto") -> None:
        if isolation not in ("auto", "strict", "none"):
            raise ValueError(f"isolation must be auto, strict or none, got {isolation!r}")
        self.limits = limits or Limits()
        self.mode = isolation
        self._plan: IsolationPlan | None = None
        self._python = ""

    def _ensure(self) -> IsolationPlan:
        if self._plan is None:
            self._plan, self._python = probe_isolation(self.mode)
        return self._plan

    @property
    def python(self) -> str:
        """A Python interpreter that can run inside this sandbox (stdlib only: run it with -I -S)."""
        self._ensure()
        return self._python

    @property
    def isolation(self) -> str:
        """The isolation layers every run of this sandbox gets, e.g. "rlimits+...+uid=..."."""
        plan = self._ensure()
        return replace(plan, uid=None).describe() + ("+fresh-uid" if plan.uid is not None else "")

    def run(
        self,
        argv: Sequence[str],
        files: Mapping[str, str | bytes | Path],
        *,
        limits: Limits | None = None,
        stdin: bytes = b"",
        report: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> SandboxResult:
        """Run `argv` (cwd = the copy of `files`; ``{report_fd}`` in argv is replaced by the
        report pipe's fd when `report`). Never raises for what the command does; raises
        `SandboxError` only when the sandbox itself cannot be set up."""
        plan = self._ensure()
        if plan.uid is not None:
            plan = replace(plan, uid=fresh_uid())
        try:
            return _execute(argv, files, limits or self.limits, plan, stdin, report, env)
        except StagingError as exc:
            raise SandboxError(str(exc)) from exc
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"could not start {argv[0]!r} in the sandbox: {exc}") from exc
