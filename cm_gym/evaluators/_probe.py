"""Which sandbox isolation works here: layer plans strongest first, each tried once per process
with a real interpreter run (a plan is only ever reported when a process actually ran under it)."""

from __future__ import annotations

import functools
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence

from cm_gym.core.types import CmGymError
from cm_gym.evaluators._process import stage
from cm_gym.evaluators.isolation import IsolationPlan, RLimits, libc_available, make_preexec, processes_of_uid
from cm_gym.evaluators.rootfs import RootPlan, plan_root

logger = logging.getLogger(__name__)


class SandboxError(CmGymError):
    """The sandbox could not be set up (no usable interpreter, strict isolation unavailable)."""


_UID_BASE = 1_800_000_000
_PROBE_LOCK = threading.Lock()
_PROBED: dict[str, tuple[IsolationPlan, str]] = {}


def fresh_uid() -> int:
    """An unused uid for one run (nothing on the machine belongs to it)."""
    while True:
        uid = _UID_BASE + secrets.randbelow(1 << 24)
        if not processes_of_uid(uid, include_zombies=True):
            return uid


@functools.lru_cache(maxsize=16)
def root_plan(extra: Sequence[str] = (), hide: Sequence[str] = ()) -> RootPlan:
    """The minimal file tree (`rootfs.plan_root`), computed once per process and arguments."""
    return plan_root(tuple(extra), tuple(hide))


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
            IsolationPlan(net=True, mount=True, fs=True, uid=uid),
            IsolationPlan(net=True, mount=True, uid=uid),
            IsolationPlan(net=True, uid=uid),
            IsolationPlan(uid=uid),
        ]
        weak = [IsolationPlan(net=True), IsolationPlan()]
    else:
        strong = []
        weak = [
            IsolationPlan(userns=True, net=True, mount=True, fs=True),
            IsolationPlan(userns=True, net=True, mount=True),
            IsolationPlan(userns=True, net=True),
            IsolationPlan(),
        ]
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
    """Run a tiny interpreter under `plan`: it must start, write its scratch dir and (with a
    minimal tree) not see this process's working files."""
    base = tempfile.mkdtemp(prefix="cm_gym_sbx_")
    workdir, newroot = os.path.join(base, "copy"), os.path.join(base, "root")
    try:
        os.chmod(base, 0o755)
        os.mkdir(workdir)
        os.mkdir(newroot)
        stage(__import__("pathlib").Path(workdir), {"probe.txt": "x"}, plan.uid)
        here = os.path.dirname(os.path.abspath(__file__))
        code = f"import os;open('scratch/p','w').write('x');print(os.getuid(), os.path.exists({here!r}))"
        rl = RLimits(address_space=512 << 20, cpu_seconds=5, processes=64, file_size=1 << 20)
        root = root_plan() if plan.fs else None
        res = subprocess.run(
            [python, "-I", "-S", "-c", code],
            cwd=workdir,
            env={"PATH": "/usr/bin:/bin", "HOME": os.path.join(workdir, "scratch")},
            capture_output=True,
            text=True,
            timeout=20,
            start_new_session=True,
            preexec_fn=make_preexec(plan, rl, workdir, root=root, newroot=newroot),
        )
    except (OSError, subprocess.SubprocessError, CmGymError) as exc:
        logger.debug("sandbox probe %s with %s failed: %s", plan.describe(), python, exc)
        return False
    finally:
        shutil.rmtree(base, ignore_errors=True)
    words = res.stdout.split()
    good = res.returncode == 0 and len(words) == 2
    good = good and (plan.uid is None or words[0] == str(plan.uid)) and (not plan.fs or words[1] == "False")
    if not good:
        logger.debug(
            "sandbox probe %s with %s: rc=%s %s", plan.describe(), python, res.returncode, res.stderr[-300:]
        )
    return good
