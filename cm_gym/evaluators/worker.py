"""A killable, reusable worker process: run one check where a deadline and a memory cap hold.

Engines that run in-process (SQLite, z3, python-sat) cannot always interrupt themselves: one
SQLite function call, one z3 tactic, one solver call on a huge clause set may run for minutes or
take gigabytes. `Worker` runs such a call in a separate process that is started once and reused
(so a call costs a pipe round trip, ~50 us, not a process start), killed with SIGKILL when the
call's deadline passes or its memory exceeds the cap, and started again on the next call.

    worker = Worker("cm_gym.domains.sql._engine", memory_mb=1024)
    res = worker.call("run_query", path, sql, timeout=60, cpu_budget_s=5)
    if res.ok: rows = res.value
    else: print(res.status, res.error)        # "timeout" | "cpu" | "budget" | "error"

Contract:
- `module` is imported in the worker by name, **without running its parent packages'
  ``__init__``** (they are stubbed with their real search paths): ``import cm_gym`` registers
  every domain and takes a second, a worker module should import only what it needs. Module
  globals persist between calls (e.g. open connections); `init` names a function run once at
  start.
- Functions are called by name with picklable arguments (plain data, no lambdas) and must return
  plain data (None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset).
  The reply is read by `bounded.loads_plain`: size, depth and item count are capped and no class
  of the worker's choosing is ever instantiated.
- `call` never raises for what the function or the worker does: a wall-clock deadline →
  "timeout" (the worker is killed; callers treat it as a hang guard); more than `cpu_budget_s`
  seconds of the worker's CPU time during the call → "cpu" (killed; a budget that does not
  depend on machine load, `cpuclock`); memory over the cap (``MemoryError`` inside, or the resident size seen from
  here) → "budget" (killed, restarted next time); an exception inside the function → "error"
  with its one-line text (the worker stays); a crash or malformed reply → "error" (killed).
- Memory cap: ``RLIMIT_DATA`` (the heap the worker may still grow) set by the worker itself after
  start-up, plus a check of its resident size every `poll_s` while a call runs.
- Lifecycle: the process starts on the first call (or `start()`), runs in its own session, dies
  with its parent (``PR_SET_PDEATHSIG``; a worker started from a thread that later exits dies
  then too and is restarted on the next call), is closed by `close()`, at interpreter exit, or
  when the `Worker` is garbage-collected. A `Worker` pickles to its configuration (a copy in
  another process starts its own worker), and a forked child never reuses its parent's process.
  One call at a time per `Worker` (a lock serialises threads).
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cm_gym.core.types import CmGymError
from cm_gym.evaluators._frames import read_frame, write_frame
from cm_gym.evaluators.bounded import DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES, UntrustedValueError, loads_plain
from cm_gym.evaluators.cpuclock import ProcessMeter

logger = logging.getLogger(__name__)

MAIN = str(Path(__file__).with_name("_worker_main.py"))
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_LIVE: weakref.WeakSet[Worker] = weakref.WeakSet()


class WorkerError(CmGymError):
    """The worker process could not be started (bad module, interpreter missing)."""


@dataclass(frozen=True)
class WorkerResult:
    """One call's outcome. `status`: "ok" (`value` holds the return value), "timeout" (the wall
    deadline), "cpu" (the CPU budget), "budget" (memory) or "error" (`error` says why, one
    line). `peak_rss_mb`: the worker's peak resident memory during the call when measured
    (``track_memory``); `restarted`: the worker process was (re)started for this call; `cpu_s`:
    the worker's CPU seconds during the call when a CPU budget was given."""

    status: str
    value: Any = None
    error: str = ""
    wall_s: float = 0.0
    peak_rss_mb: float | None = None
    restarted: bool = False
    cpu_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Proc:
    """A running worker process and its two pipe ends (parent side)."""

    def __init__(
        self, popen: subprocess.Popen[bytes], req: int, rep: int, stderr: IO[bytes], children: bool
    ) -> None:
        self.popen, self.req, self.rep, self.stderr = popen, req, rep, stderr
        self.owner, self.rss_base = os.getpid(), 0
        self.meter = ProcessMeter(popen.pid, children=children)  # for calls with a CPU budget

    def kill(self) -> None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with suppress(ProcessLookupError):
            self.popen.kill()
        with suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self.release()

    def release(self) -> None:
        for fd in (self.req, self.rep):
            with suppress(OSError):
                os.close(fd)
        self.req = self.rep = -1
        self.meter.close()
        with suppress(OSError):
            self.stderr.close()

    def stderr_tail(self) -> str:
        with suppress(OSError, ValueError):
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - 2000))
            lines = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
            return lines[-1][:300] if lines else ""
        return ""

    def rss(self) -> int:
        try:
            with open(f"/proc/{self.popen.pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return 0


def _packages_of(module: str) -> list[tuple[str, list[str]]]:
    """(name, search path) of each parent package of `module`, outermost first."""
    parts = module.split(".")[:-1]
    out = []
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        mod = sys.modules.get(name)
        paths = list(getattr(mod, "__path__", []) or [])
        if not paths:
            spec = importlib.util.find_spec(name)
            paths = list(spec.submodule_search_locations or []) if spec else []
        out.append((name, paths))
    return out


class Worker:
    """A reusable child process that runs functions of `module` under a deadline and a memory
    cap (see module doc). `memory_mb`: how much the worker may grow beyond its size after
    start-up (None: no cap); `poll_s`: how often its resident size is checked during a call;
    `track_memory`: measure each call's peak resident size (`WorkerResult.peak_rss_mb`; costs
    ~0.15 ms a call, so it is off by default); `children_cpu`: the CPU budget also counts reaped
    child processes (``/proc``); False (engines that start none) reads the CPU clock, cheaper."""

    def __init__(
        self,
        module: str,
        *,
        memory_mb: int | None = 1024,
        init: str | None = None,
        init_args: tuple[Any, ...] = (),
        max_reply_bytes: int = 64 << 20,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_nodes: int = DEFAULT_MAX_NODES,
        start_timeout: float = 60.0,
        poll_s: float = 0.05,
        stub_packages: bool = True,
        track_memory: bool = False,
        children_cpu: bool = True,
    ) -> None:
        self.module = module
        self.children_cpu = children_cpu
        self.memory_mb = memory_mb
        self.init, self.init_args = init, tuple(init_args)
        self.max_reply_bytes, self.max_depth, self.max_nodes = max_reply_bytes, max_depth, max_nodes
        self.start_timeout, self.poll_s, self.stub_packages = start_timeout, poll_s, stub_packages
        self.track_memory = track_memory
        self._proc: _Proc | None = None
        self._lock = threading.Lock()
        self.starts = 0
        _LIVE.add(self)

    # -- pickling: configuration only ------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_proc"], state["_lock"], state["starts"] = None, None, 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs (None before the first call or after a kill)."""
        proc = self._proc
        return proc.popen.pid if proc is not None and proc.owner == os.getpid() else None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker now (else the first call does); `WorkerError` if it cannot start."""
        with self._lock:
            self._ensure()

    def close(self) -> None:
        """Stop the worker process (a later call starts a new one)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.owner != os.getpid():  # inherited through fork: the parent's process, not ours
            proc.release()
            return
        proc.kill()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with suppress(Exception):
            self.close()

    def _ensure(self) -> bool:
        """A live worker process; True when it had to be started."""
        proc = self._proc
        if proc is not None and proc.owner != os.getpid():
            proc.release()
            proc = self._proc = None
        if proc is not None and proc.popen.poll() is None:
            return False
        if proc is not None:
            proc.release()
            self._proc = None
        self._proc = self._spawn()
        return True

    def _spawn(self) -> _Proc:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _Proc.release
        try:
            popen = subprocess.Popen(
                [sys.executable, "-I", MAIN, str(req_r), str(rep_w), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                pass_fds=(req_r, rep_w),
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (req_r, req_w, rep_r, rep_w):
                os.close(fd)
            stderr.close()
            raise WorkerError(f"could not start a worker for {self.module}: {exc}") from exc
        os.close(req_r)
        os.close(rep_w)
        proc = _Proc(popen, req_w, rep_r, stderr, getattr(self, "children_cpu", True))
        self.starts += 1
        setup = {
            "sys_path": list(sys.path),
            "packages": _packages_of(self.module) if self.stub_packages else [],
            "module": self.module,
            "memory_mb": self.memory_mb,
            "init": self.init,
            "init_args": self.init_args,
            "max_reply_bytes": self.max_reply_bytes,
        }
        try:
            write_frame(proc.req, pickle.dumps(setup, protocol=5))
            reply = self._await(proc, time.perf_counter() + self.start_timeout, watch=False)
        except OSError as exc:
            reply = ("error", f"worker set-up failed: {exc}", None)
        if reply[0] != "ok":
            why = reply[1] if isinstance(reply[1], str) else "worker set-up failed"
            tail = proc.stderr_tail()
            proc.kill()
            raise WorkerError(
                f"worker for {self.module} did not start: {why}" + (f" ({tail})" if tail else "")
            )
        proc.rss_base = proc.rss()
        return proc

    # -- calls -------------------------------------------------------------------------------
    def call(
        self, function: str, *args: Any, timeout: float, cpu_budget_s: float | None = None, **kwargs: Any
    ) -> WorkerResult:
        """Run ``module.function(*args, **kwargs)`` in the worker within `timeout` seconds of wall
        clock and, when given, `cpu_budget_s` seconds of the worker's CPU time (start-up not
        included). Never raises for what happens in the worker."""
        with self._lock:
            try:
                restarted = self._ensure()
            except WorkerError as exc:
                return WorkerResult("error", error=str(exc))
            proc = self._proc
            assert proc is not None
            meter = None
            if cpu_budget_s is not None:
                meter = proc.meter
                meter.start()
            t0 = time.perf_counter()
            try:
                payload = pickle.dumps((function, args, kwargs, self.track_memory), protocol=5)
            except Exception as exc:  # noqa: BLE001 - e.g. a lambda among the arguments
                return WorkerResult("error", error=f"arguments cannot be sent to the worker: {exc}")
            try:
                write_frame(proc.req, payload)
                status, value, peak_kb = self._await(
                    proc, t0 + timeout, watch=True, meter=meter, cpu_budget_s=cpu_budget_s
                )
            except OSError as exc:
                status, value, peak_kb = "error", f"the worker stopped ({exc})", None
            wall = time.perf_counter() - t0
            cpu = round(meter.used(), 3) if meter is not None else None
            if status in ("timeout", "cpu", "budget", "crash"):
                self._kill(proc)  # a dead, stuck or possibly fragmented worker is replaced
            if status == "crash":
                status = "error"
            if status == "ok":
                return WorkerResult("ok", value, "", wall, _mb(peak_kb), restarted, cpu)
            if status == "timeout":
                value = f"no answer within the {timeout:g} s deadline (worker killed)"
            return WorkerResult(status, None, str(value), wall, _mb(peak_kb), restarted, cpu)

    def _kill(self, proc: _Proc) -> None:
        proc.kill()
        if self._proc is proc:
            self._proc = None

    def _await(
        self,
        proc: _Proc,
        deadline: float,
        *,
        watch: bool,
        meter: ProcessMeter | None = None,
        cpu_budget_s: float | None = None,
    ) -> tuple[str, Any, Any]:
        """The next reply frame, or a synthetic ("timeout" | "cpu" | "budget" | "crash", why, None)."""
        cap = proc.rss_base + (self.memory_mb << 20) if (watch and self.memory_mb) else 0
        poll = bool(cap) or meter is not None
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return "timeout", "", None
            slice_s = min(remaining, self.poll_s) if poll else remaining
            ready, _, _ = select.select([proc.rep], [], [], slice_s)
            if ready:
                break
            if cap and proc.rss() > cap:
                return "budget", f"the memory cap of {self.memory_mb} MB was exceeded (worker killed)", None
            if meter is not None and cpu_budget_s is not None and meter.used() > cpu_budget_s:
                return "cpu", f"more than {cpu_budget_s:g} s of CPU time (worker killed)", None
        body = read_frame(proc.rep, cap=self.max_reply_bytes + 1024)  # a trusted writer: it does not stall
        if body is None:
            return "crash", self._death(proc), None
        try:
            reply = loads_plain(
                body,
                max_bytes=self.max_reply_bytes + 1024,
                max_depth=self.max_depth + 1,
                max_nodes=self.max_nodes,
            )
        except UntrustedValueError as exc:
            return "crash", f"unreadable reply from the worker: {exc}", None
        if not (isinstance(reply, tuple) and len(reply) == 3 and reply[0] in ("ok", "error", "budget")):
            return "crash", "malformed reply from the worker", None
        return reply  # type: ignore[return-value]

    def _death(self, proc: _Proc) -> str:
        with suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=2)
        rc = proc.popen.returncode
        if rc is not None and rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
            why = f"the worker died ({name})"
        else:
            why = f"the worker exited (status {rc})"
        tail = proc.stderr_tail()
        return why + (f": {tail}" if tail else "")


def _mb(kb: Any) -> float | None:
    return round(kb / 1024, 1) if isinstance(kb, int) else None


@atexit.register
def _close_all() -> None:
    for worker in list(_LIVE):
        with suppress(Exception):
            worker.close()
