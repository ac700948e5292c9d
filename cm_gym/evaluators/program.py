"""Call an untrusted Python program across a process boundary: the building block of judged tests.

`ProgramSession(sandbox, files, module)` stages the program's files in a sandbox copy and starts
one sandboxed process (`_program.py`) that imports `module` and serves calls; the caller keeps
every verdict:

    with ProgramSession(sandbox, {"solution.py": src}, "solution", limits=limits) as prog:
        res = prog.call("add", (1, 2), timeout=1.0)
        res.status   # "ok" (res.value) | "raise" (res.error_type, res.message) | "cpu" |
                     # "timeout" | "infrastructure" | "crash" | "memory" | "error" (an
                     # unreadable or uncheckable reply)

A call's budget is CPU time (`cpu_s`: seconds of CPU the run's processes spend during the call,
`cpuclock.CpuMeter`; "cpu" when spent, also when a process hits its ``RLIMIT_CPU``), the same on
a quiet and on a busy machine. `timeout` is a wall-clock hang guard far above it: when it passes,
a run that spent the time on a core or waiting for one was starved by the machine
("infrastructure": says nothing about the program), one that slept or blocked did it itself
("timeout"). Without `cpu_s` the wall clock is the only bound ("timeout").

Arguments and results travel by value with identity preserved (`wire.py`): objects of the plain
classes the caller sends (e.g. linked-list or graph nodes) come back updated in place (call by
copy-restore), and the program may only answer with plain data and those classes. Replies are
read with `bounded.loads_sequences` (tuples, lists and atoms only; size, depth and item caps)
and decoded without recursion and with bounded hashing (`wire.py`), so no reply can crash the
caller or keep it busy in C code past its deadline. After a timeout, crash or memory kill the process (and every
process of its run) is killed; the next call starts a fresh one. Memory is capped for the whole
run (`Limits.memory_mb`, summed over its processes).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cm_gym.evaluators import wire
from cm_gym.evaluators._frames import HEADER, write_frame
from cm_gym.evaluators._process import MemoryWatch, wait_readable
from cm_gym.evaluators.bounded import UntrustedValueError, loads_sequences
from cm_gym.evaluators.cpuclock import CpuMeter
from cm_gym.evaluators.sandbox import Limits, Sandbox, Session

_HERE = Path(__file__).parent
PROGRAM_SOURCE = (_HERE / "_program.py").read_text(encoding="utf-8")
WIRE_SOURCE = (_HERE / "wire.py").read_text(encoding="utf-8")
FRAMES_SOURCE = (_HERE / "_frames.py").read_text(encoding="utf-8")
MAX_REPLY_BYTES = 16 << 20


@dataclass(frozen=True)
class CallResult:
    """One call's outcome (see module doc)."""

    status: str
    value: Any = None
    error_type: str = ""
    message: str = ""
    cpu_s: float | None = None  # CPU seconds the run's processes spent during the call

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class ProgramSession:
    """An untrusted program served from one sandbox copy (see module doc). `sys_path`: entries
    (relative to the copy) put before the stdlib; `cpu_s`: the CPU budget of each process."""

    def __init__(
        self,
        sandbox: Sandbox,
        files: Mapping[str, str],
        module: str,
        *,
        limits: Limits | None = None,
        sys_path: Sequence[str] = (".",),
        uid: int | None = None,
        cpu_s: float | None = None,
        parent_dir: str | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.limits = limits or sandbox.limits
        staged = dict(files)
        staged.update({"_cm_program.py": PROGRAM_SOURCE, "_cm_wire.py": WIRE_SOURCE, "_cm_frames.py": FRAMES_SOURCE,
                       "_cm_program.json": json.dumps({"module": module, "sys_path": list(sys_path)})})  # fmt: skip
        self.session: Session = sandbox.session(staged, limits=self.limits, uid=uid, parent_dir=parent_dir)
        self.cpu_s = cpu_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.req = self.rep = -1
        self.starts = 0
        self.strays = 0
        self.classes: dict[str, type] = {}
        self._stderr = open(os.devnull, "wb")  # noqa: SIM115 - closed in close()

    # -- process lifecycle ---------------------------------------------------------------------
    def _start(self) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            self.proc = self.session.start(
                [self.sandbox.python, "-I", "-S", "_cm_program.py", str(req_r), str(rep_w)],
                pass_fds=(req_r, rep_w),
                stderr=self._stderr,
                cpu_s=self.cpu_s,
            )
        finally:
            os.close(req_r)
            os.close(rep_w)
        self.req, self.rep = req_w, rep_r
        self.starts += 1

    def _stop(self) -> None:
        for fd in (self.req, self.rep):
            if fd >= 0:
                os.close(fd)
        self.req = self.rep = -1
        if self.proc is not None:
            self.strays += self.session.kill_all()
            self.proc = None

    def close(self) -> None:
        """Kill every process of the run and delete the copy."""
        self._stop()
        self.strays += self.session.close()
        self._stderr.close()

    def __enter__(self) -> ProgramSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def peak_rss_mb(self) -> float:
        watch = self.session.watch
        return round(watch.peak / (1 << 20), 1) if watch else 0.0

    # -- calls ---------------------------------------------------------------------------------
    def call(
        self,
        function: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout: float,
        cpu_s: float | None = None,
    ) -> CallResult:
        """``module.function(*args, **kwargs)`` in the sandbox (see module doc)."""
        kwargs = dict(kwargs or {})
        roots = [*args, *kwargs.values()]
        return self._request(lambda t, r: ("call", function, t, r, list(kwargs)), roots, timeout, cpu_s)

    def eval(
        self,
        expr: str,
        names: Mapping[str, Any],
        *,
        function: str = "",
        timeout: float,
        cpu_s: float | None = None,
    ) -> CallResult:
        """Evaluate `expr` in the sandbox with `names` (and `function` of the module) bound."""
        return self._request(
            lambda t, r: ("eval", expr, t, r, list(names), function), list(names.values()), timeout, cpu_s
        )

    def _request(
        self, build: Any, roots: list[Any], timeout: float, cpu_s: float | None = None
    ) -> CallResult:
        try:
            table, slots, objects = wire.encode(roots)
        except wire.WireError as exc:
            return CallResult("error", message=f"the arguments cannot be sent: {exc}")
        for obj in objects:
            if type(obj) not in wire.ATOMS and wire.is_plain_object(obj):
                self.classes[wire.class_key(type(obj))] = type(obj)
        if self.proc is None or self.proc.poll() is not None:
            self._stop()
            self._start()
        watch = self.session.watch
        meter = CpuMeter(watch.pids if watch is not None else lambda: ())
        meter.start()
        t0 = time.perf_counter()
        deadline = t0 + timeout
        over_cpu = (lambda: meter.used() > cpu_s) if cpu_s is not None else None
        try:
            write_frame(self.req, pickle.dumps(build(table, slots), protocol=4))
        except OSError:
            return self._fail("crash", "the program process died")
        data, why = _recv(self.rep, MAX_REPLY_BYTES, deadline, watch, over_cpu)
        used = round(meter.used(), 3)
        if why == "timeout" and cpu_s is not None:
            starved = meter.starved(time.perf_counter() - t0)
            why = "infrastructure" if starved else "timeout"
        if why == "crash" and self._killed_by_cpu_limit():
            why = "cpu"
        if why:
            return self._fail(why, "" if why != "crash" else self._exit_text(), used)
        assert data is not None
        try:
            reply = loads_sequences(data, max_bytes=MAX_REPLY_BYTES, max_depth=8)
        except UntrustedValueError as exc:
            return self._fail("error", f"unreadable reply from the program: {exc}", used)
        result = self._reply(reply, objects)
        return CallResult(result.status, result.value, result.error_type, result.message, used)

    def _reply(self, reply: Any, objects: list[Any]) -> CallResult:
        if not (isinstance(reply, tuple) and reply and reply[0] in ("ok", "raise", "error")):
            return self._fail("error", "malformed reply from the program")
        if reply[0] == "raise" and len(reply) == 3 and all(isinstance(x, str) for x in reply[1:]):
            return CallResult("raise", error_type=reply[1][:100], message=reply[2][:500])
        if reply[0] == "error" and len(reply) == 2 and isinstance(reply[1], str):
            return CallResult("error", message=reply[1][:500])
        if reply[0] != "ok" or len(reply) != 3:
            return self._fail("error", "malformed reply from the program")
        try:
            (value,) = wire.decode(reply[1], reply[2], existing=objects, classes=self.classes)
        except (wire.WireError, TypeError, ValueError, RecursionError, MemoryError) as exc:
            return CallResult("error", message=f"the result cannot be checked: {exc}")
        return CallResult("ok", value)

    def _fail(self, status: str, message: str, cpu_s: float | None = None) -> CallResult:
        self._stop()
        return CallResult(status, message=message, cpu_s=cpu_s)

    def _killed_by_cpu_limit(self) -> bool:
        proc = self.proc
        if proc is None:
            return False
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == -signal.SIGXCPU

    def _exit_text(self) -> str:
        proc = self.proc
        if proc is None:
            return "the program process ended"
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "the program process stopped answering"
        rc = proc.returncode
        if rc is not None and rc < 0:
            return f"the program process was killed by signal {-rc}"
        return f"the program process exited (status {rc})"


def _recv(
    fd: int, cap: int, deadline: float, watch: MemoryWatch | None, over_cpu: Any = None
) -> tuple[bytes | None, str]:
    """One length-prefixed frame, read within the deadline: (data, "") or (None, "timeout" |
    "memory" | "cpu" | "crash" | "error")."""
    chunks: list[bytes] = []
    need, header = HEADER.size, True
    while need:
        why = wait_readable(fd, deadline, watch, over_cpu=over_cpu)
        if why:
            return None, why
        try:
            chunk = os.read(fd, min(need, 1 << 20))
        except OSError:
            chunk = b""
        if not chunk:
            return None, "crash"
        chunks.append(chunk)
        need -= len(chunk)
        if not need and header:
            size = HEADER.unpack(b"".join(chunks))[0]
            if size > cap:
                return None, "error"
            chunks, need, header = [], size, False
    return b"".join(chunks), ""


__all__ = ["CallResult", "ProgramSession"]
