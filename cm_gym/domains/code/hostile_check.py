"""Run the hostile-patch corpus through a `CodeEvaluator` and check that nothing escaped.

For each patch: fresh canaries (a world-writable folder in /tmp with one file), a TCP server on
127.0.0.1 that counts connections, a secret in this process's environment; then the check, then
the containment checks — not solved, a reason given, canaries untouched, nothing written to the
host's /tmp, no connection received, no process of a sandbox uid left behind, the evaluator still
answers. Used by the test suite and by the bench script.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from cm_gym.core.paths import DataNotFoundError, cache_dir, data_root
from cm_gym.core.types import Action, AgentState, Outcome
from cm_gym.domains.code.evaluator import CodeEvaluator
from cm_gym.domains.code.hostile import CORPUS, HostilePatch, hostile_task
from cm_gym.domains.code.hostile_forgery import hostile_pytest_task
from cm_gym.evaluators.isolation import processes_of_uid

SECRET_VAR = "CM_GYM_TEST_SECRET"
CANARY_TEXT = "canary\n"


@dataclass
class HostileResult:
    name: str
    outcome: Outcome | None
    seconds: float
    violations: list[str] = field(default_factory=list)
    skipped: str = ""

    @property
    def contained(self) -> bool:
        return not self.violations


def available_layers(isolation: str) -> set[str]:
    """The corpus' layer names present in a `Sandbox.isolation` description."""
    layers = set()
    if "fresh-uid" in isolation or "uid=" in isolation:
        layers.add("uid")
    if "network-namespace" in isolation:
        layers.add("net")
    if "private-tmp" in isolation or "minimal-root" in isolation:
        layers.add("mount")
    if "minimal-root" in isolation:
        layers.add("fs")
    return layers


class _Server:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@contextmanager
def _secret() -> Iterator[None]:
    old = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = secrets.token_hex(8)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(SECRET_VAR, None)
        else:
            os.environ[SECRET_VAR] = old


def canary_base() -> str:
    """Where canaries go: a root-owned, non-temp folder the sandbox can see (/var/cache) when we
    may write there, else the temp dir (which the sandbox's private /tmp hides)."""
    for base in ("/var/cache", tempfile.gettempdir()):
        if os.path.isdir(base) and os.access(base, os.W_OK):
            return base
    return tempfile.gettempdir()


def _readable_targets(stack: ExitStack) -> dict[str, Path]:
    """Files a patch must not see: one of the data folder, the package's generated references,
    a file in another run's copy (made here) and one in the cache folder (made here)."""
    targets: dict[str, Path] = {"package_file": Path(__file__).resolve().parent / "data/generated_tasks.txt"}
    with suppress(DataNotFoundError, StopIteration):
        root = data_root()
        readme = root / "README.md"
        targets["data_file"] = (
            readme if readme.is_file() else next(p for p in sorted(root.iterdir()) if p.is_file())
        )
    other = Path(tempfile.mkdtemp(prefix="cm_gym_sbx_"))
    stack.callback(shutil.rmtree, other, True)
    os.chmod(other, 0o755)
    (other / "solution.py").write_text(_ADD_FIXED)
    os.chmod(other / "solution.py", 0o644)
    targets["other_task_file"] = other / "solution.py"
    cached = cache_dir("probes") / f"answer_{secrets.token_hex(4)}.txt"
    cached.write_text("42")
    stack.callback(cached.unlink, True)
    targets["cache_file"] = cached
    return targets


_ADD_FIXED = "def add(a, b):\n    return a + b\n"


def check_patch(evaluator: CodeEvaluator, patch: HostilePatch) -> HostileResult:
    """Run one hostile patch and report every containment violation found."""
    layers = available_layers(evaluator.sandbox.isolation)
    missing = [n for n in patch.needs if n not in layers]
    if missing:
        return HostileResult(patch.name, None, 0.0, skipped=f"needs isolation layer(s) {missing}")
    with ExitStack() as stack:
        return _check(evaluator, patch, stack)


def _check(evaluator: CodeEvaluator, patch: HostilePatch, stack: ExitStack) -> HostileResult:
    canary_dir = Path(tempfile.mkdtemp(prefix="cm_gym_canary_", dir=canary_base()))
    stack.callback(shutil.rmtree, canary_dir, True)
    os.chmod(canary_dir, 0o755)
    canary = canary_dir / "canary.txt"
    canary.write_text(CANARY_TEXT)
    os.chmod(canary, 0o644)
    marker = secrets.token_hex(6)
    stack.callback(Path(f"/tmp/cm_gym_pwned_{marker}").unlink, True)
    server = _Server()
    stack.callback(server.close)
    values: dict[str, object] = {"canary_dir": canary_dir, "canary_file": canary, "port": server.port,
                                 "host_pid": os.getpid(), "marker": marker}  # fmt: skip
    values.update(_readable_targets(stack))
    try:
        source = patch.render(values)
    except KeyError as exc:  # e.g. no data folder here
        return HostileResult(patch.name, None, 0.0, skipped=f"no target for {exc}")
    base = hostile_task(patch.timeout)
    task = base if patch.mode == "cases" else hostile_pytest_task(base, patch.timeout)
    start = time.perf_counter()
    with _secret():
        outcome = evaluator.check(AgentState(task), Action(source))
    seconds = time.perf_counter() - start
    time.sleep(0.05)
    v: list[str] = []
    if outcome.solved:
        v.append("the check passed")
    if not (outcome.feedback or outcome.reason):
        v.append("no reason given")
    if not canary.exists() or canary.read_text() != CANARY_TEXT:
        v.append("canary file deleted or modified")
    if canary_dir.exists() and sorted(p.name for p in canary_dir.iterdir()) != ["canary.txt"]:
        v.append("files written next to the canary")
    if Path(f"/tmp/cm_gym_pwned_{marker}").exists():
        v.append("file written to the host's /tmp")
    if server.connections:
        v.append(f"{server.connections} connection(s) reached the host")
    uid = outcome.details.get("sandbox_uid")
    if uid is not None and processes_of_uid(int(uid)):
        v.append("sandbox processes left running")
    return HostileResult(patch.name, outcome, seconds, v)


def run_corpus(evaluator: CodeEvaluator, patches: Sequence[HostilePatch] = CORPUS) -> list[HostileResult]:
    """Every patch in turn, then one honest check to show the evaluator still works."""
    results = [check_patch(evaluator, p) for p in patches]
    honest = evaluator.check(AgentState(hostile_task()), Action(hostile_task().reference))
    ok = HostileResult("honest_fix_afterwards", honest, 0.0)
    if not honest.solved:
        ok.violations.append(f"the evaluator no longer works: {honest.feedback}")
    results.append(ok)
    return results
