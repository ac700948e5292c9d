"""llama.cpp engines as child processes: start on free loopback ports, wait until ready, stop.

Each engine is ``python -m llama_cpp.server`` (the official ``llama-cpp-python`` binding, which
vendors llama.cpp; ``cm-gym setup-local-model`` builds it once per machine) serving one GGUF file
over the OpenAI-compatible API on ``127.0.0.1``. One engine per core, **one thread each**: on a
shared 2-core machine two threads per process were 7× slower at generation under load, and two
single-threaded engines answer two calls at once. Every engine keeps the KV cache of its last
prompt (llama.cpp reuses the longest common prefix), so prompts that share a prefix with the one
before (the instructions, then the database schema) are not re-evaluated; `LocalLLM` sends a call
to the engine that saw its prefix last. ``prompt_cache`` adds llama-cpp-python's RAM cache of
earlier prompts' states; it is off by default: on HumanEval prompts it grew one engine to 8.8 GB
of memory and the kernel killed it (measured on this 2-core, 24 GB machine).

No orphan engine: an engine is started from one long-lived keeper thread with
``PR_SET_PDEATHSIG`` (the kernel kills it when the thread that forked it dies, i.e. with this
process, also on SIGKILL), `stop` terminates then kills it, and ``atexit`` stops every engine
still running at a normal exit or Ctrl-C.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import cache_dir
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

ENGINE = "llama-cpp-python"
ENGINE_VERSION = "0.3.36"
READY_TIMEOUT_S = 300.0
DEFAULT_CTX = 4096


def engine_installed() -> bool:
    """Whether the binding and its server extra import here (without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "uvicorn", "fastapi"))


def require_engine() -> None:
    if not engine_installed():
        raise LLMError(
            f"the local model engine ({ENGINE}=={ENGINE_VERSION} with its server extra) is not "
            "installed: run `cm-gym setup-local-model <model>` (builds llama.cpp once per machine)"
        )


def free_port() -> int:
    """A loopback port nobody listens on now (the engine binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the keeper thread: forks every engine, lives as long as the process ---------------------------
_SPAWN: queue.Queue[tuple[list[str], dict[str, Any], queue.Queue[Any]]] = queue.Queue()
_KEEPER: threading.Thread | None = None
_KEEPER_LOCK = threading.Lock()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


def _keeper() -> None:
    while True:
        argv, kwargs, reply = _SPAWN.get()
        try:
            reply.put(subprocess.Popen(argv, preexec_fn=_die_with_parent, **kwargs))  # noqa: S603, PLW1509
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            reply.put(exc)


def _spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen` from the keeper thread (see the module docstring)."""
    global _KEEPER
    with _KEEPER_LOCK:
        if _KEEPER is None or not _KEEPER.is_alive():
            _KEEPER = threading.Thread(target=_keeper, name="cm-gym-engine-keeper", daemon=True)
            _KEEPER.start()
    reply: queue.Queue[Any] = queue.Queue()
    _SPAWN.put((argv, kwargs, reply))
    result = reply.get()
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[no-any-return]


_RUNNING: set[Engine] = set()
_RUNNING_LOCK = threading.Lock()


@atexit.register
def stop_all() -> None:
    """Stop every engine this process started and still runs."""
    with _RUNNING_LOCK:
        engines = list(_RUNNING)
    for engine in engines:
        engine.stop()


@dataclass(eq=False)
class Engine:
    """One llama.cpp server process serving `model_file` under the name `alias`."""

    model_file: Path
    alias: str
    threads: int = 1
    n_ctx: int = DEFAULT_CTX
    seed: int = 0
    prompt_cache: bool = False  # llama-cpp-python's RAM cache of prompt states: see the module docstring
    verbose: bool = False  # llama.cpp's timings and prefix-match lines in the log (the bench reads them)
    port: int = 0
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    ready_s: float = 0.0
    _exit_code: int | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self) -> list[str]:
        args = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_file), "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
            "--n_ctx", str(self.n_ctx), "--n_batch", "512", "--seed", str(self.seed),
            "--logits_all", "False",  # logits of the last token only: prompts evaluate faster
            "--interrupt_requests", "False",  # a second request waits; it never cuts the first
            "--verbose", str(self.verbose),
        ]  # fmt: skip
        if self.prompt_cache:
            args += ["--cache", "True", "--cache_type", "ram", "--cache_size", str(1 << 30)]
        return args

    def start(self, timeout: float = READY_TIMEOUT_S) -> Engine:
        """Start the process and wait until it answers ``/v1/models`` (one `LLMError` with the
        tail of its log if it exits or is not ready within `timeout` seconds)."""
        require_engine()
        self.port = self.port or free_port()
        self.log_path = self.log_path or cache_dir("engines") / f"{self.alias}-{self.port}.log"
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "OPENBLAS_NUM_THREADS": "1"}
        started = time.perf_counter()
        with self.log_path.open("wb") as log:
            self.process = _spawn(
                self.argv(), stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL
            )
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        try:
            self._wait_ready(started + timeout)
        except BaseException:
            self.stop()
            raise
        self.ready_s = time.perf_counter() - started
        logger.info("llama.cpp engine %s ready on port %d in %.1f s", self.alias, self.port, self.ready_s)
        return self

    def _wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        while True:
            code = self.process.poll()
            if code is not None:
                raise LLMError(
                    f"the llama.cpp engine for {self.alias} exited with code {code}: {self.log_tail()}"
                )
            if ready(self.base_url):
                return
            if time.perf_counter() > deadline:
                raise LLMError(
                    f"the llama.cpp engine for {self.alias} was not ready in time: {self.log_tail()}"
                )
            time.sleep(0.2)

    def log_tail(self, n: int = 600) -> str:
        try:
            return (
                (self.log_path.read_bytes()[-n:] if self.log_path else b"").decode(errors="replace").strip()
            )
        except OSError:
            return "(no log)"

    def exit_reason(self) -> str:
        """How the process ended, in words (for an error message)."""
        code = self.process.poll() if self.process is not None else self._exit_code
        if code is None:
            return "is running"
        if code == -signal.SIGKILL:
            return "was killed (SIGKILL: out of memory?)"
        return f"exited with code {code}: {self.log_tail(300)}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        """Terminate the process (SIGKILL after `grace` seconds); idempotent."""
        process, self.process = self.process, None
        if process is not None:
            self._exit_code = process.poll()
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def cpu_seconds(self) -> float:
        """CPU seconds the process has used (user + system; Linux ``/proc``), 0 when gone."""
        if self.process is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ready(base_url: str, timeout: float = 2.0) -> bool:
    """Whether an OpenAI-compatible server answers ``GET /models`` at `base_url`."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as response:  # noqa: S310 - loopback
            return bool(
                response.status == 200
                and boundedjson.loads(response.read(1 << 16), max_bytes=1 << 16, max_depth=16)
            )
    except (OSError, ValueError, urllib.error.URLError):
        return False


def default_engines() -> int:
    """One engine per core this process may use (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
