"""Run untrusted commands on a throw-away copy of some files, with limits and isolation.

`Sandbox.run(argv, files)` writes `files` into a fresh temporary directory (read-only to the
sandboxed process, except its ``scratch/`` dir, which is also its HOME and TMPDIR), starts `argv`
there in a new session with a scrubbed environment, rlimits (address space, CPU, processes, file
size, open files), a memory cap on the whole run (the resident memory of all its processes, so
forks cannot multiply it) and whatever isolation layers the platform allows (`isolation.py`), waits
with a wall-clock timeout, kills every process of the run afterwards, captures stdout/stderr
truncated, optionally reads a *report channel* (a pipe only the child receives), and deletes the
copy. `Sandbox.session(files)` stages one copy for several processes started and killed in turn
(an interactive test run), with the same limits, cleanup and memory watch.

Which layers work is probed once per process (`_probe.py`), strongest first, and every
`SandboxResult` says what was applied. What is isolated where (honestly):

- root (as in CI): a fresh uid per run (it cannot write, delete or signal anything outside its
  scratch dir; ``RLIMIT_NPROC`` caps fork/thread bombs; the run's processes are found and killed
  by uid), a network namespace (no route anywhere), and a *minimal file tree* (`rootfs.py`): only
  system directories, the interpreter and the copy exist — not the data folder, the package and
  its generated references, caches, homes or other runs' copies — with a ``/proc`` that shows the
  run's own processes only. There is no seccomp filter and no cgroup (memory is capped by the
  per-process address-space limit and by summing the run's resident memory while it runs).
- not root: no fresh uid, so the code runs as the caller; the limits and, if the kernel allows
  unprivileged user namespaces, the network namespace and the minimal tree apply, and the
  process limit counts all of the caller's processes.
- ``isolation="none"``: limits and a new session only (for measuring the overhead).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cm_gym.core.types import CmGymError
from cm_gym.evaluators._probe import SandboxError, fresh_uid, probe_isolation, root_plan
from cm_gym.evaluators._process import (
    SCRATCH,
    MemoryWatch,
    StagingError,
    exit_cpu_s,
    kill_group,
    read_capped,
    stage,
    wait,
)
from cm_gym.evaluators.isolation import IsolationPlan, RLimits, kill_uid, make_preexec, processes_of_uid

logger = logging.getLogger(__name__)

_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}

__all__ = [
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "Session",
    "ToolNotFoundError",
    "probe_isolation",
]


class ToolNotFoundError(CmGymError):
    """An external tool a world model needs (e.g. the `dafny` verifier) is not installed."""


@dataclass(frozen=True)
class Limits:
    """Budgets of one sandboxed run. `memory_mb` caps each process's address space *and* the
    resident memory of all the run's processes together."""

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
    """What happened. `killed` is "" or why the run was stopped ("timeout", "memory",
    "report-too-large"); `signal` is the terminating signal number (0 if it exited);
    `isolation` names the layers; `peak_rss_mb` the run's largest measured resident memory;
    `cpu_s` the CPU seconds of the started process and the children it reaped (read at its exit,
    before it was reaped: the clock of CPU-time budgets)."""

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
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0

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


class Session:
    """One staged copy of `files` under one plan (and one fresh uid when root): processes are
    started in it with `start`, and `kill_all` / `close` end every process of the run."""

    def __init__(self, sandbox: Sandbox, files: Mapping[str, str | bytes | Path], limits: Limits,
                 plan: IsolationPlan, parent_dir: str | None = None) -> None:  # fmt: skip
        self.sandbox, self.limits, self.plan = sandbox, limits, plan
        self.base = Path(tempfile.mkdtemp(prefix="cm_gym_sbx_", dir=parent_dir))
        os.chmod(self.base, 0o755)
        self.workdir = self.base / "copy"
        self.workdir.mkdir()
        self.newroot = self.base / "root"
        self.newroot.mkdir()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.watch: MemoryWatch | None = None
        try:
            stage(self.workdir, files, plan.uid)
        except BaseException:
            shutil.rmtree(self.base, ignore_errors=True)
            raise

    @property
    def uid(self) -> int | None:
        return self.plan.uid

    def start(
        self,
        argv: Sequence[str],
        *,
        stdin: int | None = None,
        stdout: Any = subprocess.DEVNULL,
        stderr: Any = subprocess.DEVNULL,
        pass_fds: tuple[int, ...] = (),
        env: Mapping[str, str] | None = None,
        cpu_s: float | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in the copy under the session's limits and layers."""
        limits = self.limits
        procs = limits.max_procs
        if self.plan.uid is None and os.geteuid() != 0:
            procs += len(processes_of_uid(os.getuid()))
        rl = RLimits(
            address_space=limits.memory_mb << 20,
            cpu_seconds=max(1, int(round(cpu_s if cpu_s is not None else limits.cpu_s))),
            processes=procs,
            file_size=limits.max_file_mb << 20,
            open_files=limits.open_files,
        )
        scratch = str(self.workdir / SCRATCH)
        full_env = dict(_BASE_ENV, HOME=scratch, TMPDIR=scratch)
        full_env.update(env or {})
        root = root_plan(self.sandbox.extra_paths, self.sandbox.hide_paths) if self.plan.fs else None
        proc = subprocess.Popen(
            list(argv),
            cwd=self.workdir,
            env=full_env,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=make_preexec(self.plan, rl, str(self.workdir), root=root, newroot=str(self.newroot)),
        )
        self.procs.append(proc)
        cap = limits.memory_mb << 20
        if self.watch is None or self.plan.uid is None:
            peak = self.watch.peak if self.watch else 0
            self.watch = MemoryWatch(self.plan.uid, proc.pid, cap)
            self.watch.peak = peak
        return proc

    def kill_all(self) -> int:
        """SIGKILL every process of the run (its uid's, or its process groups'); strays found."""
        for proc in self.procs:
            kill_group(proc.pid)
        strays = kill_uid(self.plan.uid) if self.plan.uid is not None else 0
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL never takes this long
                logger.warning("sandboxed process %d did not die", proc.pid)
        self.procs = []
        return strays

    def close(self) -> int:
        """End every process and delete the copy; returns the number of strays killed."""
        try:
            return self.kill_all()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox:
    """Runs commands on throw-away copies of files under `limits` and the strongest isolation
    this platform allows (`isolation`: "auto", "strict" or "none"; see `probe_isolation`).
    `extra_paths`: directories a tool needs that the minimal tree lacks (read-only);
    `hide_paths`: more paths the sandbox must not see."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        isolation: str = "auto",
        extra_paths: Sequence[str] = (),
        hide_paths: Sequence[str] = (),
    ) -> None:
        if isolation not in ("auto", "strict", "none"):
            raise ValueError(f"isolation must be auto, strict or none, got {isolation!r}")
        self.limits = limits or Limits()
        self.mode = isolation
        self.extra_paths, self.hide_paths = tuple(extra_paths), tuple(hide_paths)
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
        """The isolation layers every run of this sandbox gets, e.g. "rlimits+...+fresh-uid"."""
        plan = self._ensure()
        layers = replace(plan, uid=None).describe() + ("+fresh-uid" if plan.uid is not None else "")
        return layers + "+memory-watch"

    def session(
        self,
        files: Mapping[str, str | bytes | Path],
        *,
        limits: Limits | None = None,
        uid: int | None = None,
        parent_dir: str | None = None,
    ) -> Session:
        """A staged copy for several processes (see `Session`); `uid` picks the fresh uid to run
        as (when the plan has one) and `parent_dir` where the copy goes, e.g. so that a caller
        can kill strays and delete the copy if this process dies."""
        plan = self._ensure()
        if plan.uid is not None:
            plan = replace(plan, uid=uid if uid is not None else fresh_uid())
        try:
            return Session(self, files, limits or self.limits, plan, parent_dir)
        except StagingError as exc:
            raise SandboxError(str(exc)) from exc

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
        lim = limits or self.limits
        with self.session(files, limits=lim) as sess:
            try:
                return _run_in(sess, argv, lim, stdin, report, env, self.isolation)
            except (OSError, subprocess.SubprocessError) as exc:
                raise SandboxError(f"could not start {argv[0]!r} in the sandbox: {exc}") from exc


def _run_in(
    sess: Session,
    argv: Sequence[str],
    limits: Limits,
    stdin: bytes,
    report: bool,
    env: Mapping[str, str] | None,
    isolation: str,
) -> SandboxResult:
    r_fd = w_fd = -1
    try:
        if report:
            r_fd, w_fd = os.pipe()
        argv = [a.replace("{report_fd}", str(w_fd)) for a in argv]
        with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
            t0 = time.perf_counter()
            proc = sess.start(
                argv,
                stdin=subprocess.PIPE if stdin else None,
                stdout=out_f,
                stderr=err_f,
                pass_fds=(w_fd,) if w_fd >= 0 else (),
                env=env,
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
            report_bytes, killed = wait(proc, r_fd, t0 + limits.wall_s, limits.report_bytes, sess.watch)
            wall = time.perf_counter() - t0
            strays = sess.kill_all()
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
            isolation=isolation,
            strays_killed=strays,
            output_truncated=t1 or t2,
            uid=sess.uid,
            peak_rss_mb=round((sess.watch.peak if sess.watch else 0) / (1 << 20), 1),
            cpu_s=round(exit_cpu_s(proc), 3),
        )
    finally:
        for fd in (r_fd, w_fd):
            if fd >= 0:
                os.close(fd)
