"""Linux isolation primitives for the sandbox: namespaces, private temp mounts, rlimits, uid drop.

Everything here runs in the forked child *before* `exec` (through `subprocess`'s ``preexec_fn``),
so it only uses syscalls through ctypes and never allocates much. What can be applied depends on
the platform and on privileges; `IsolationPlan` says which layers to apply and the sandbox probes
(once per process) which plan actually works, falling back layer by layer.

Layers (each optional):
- ``net``: a fresh network namespace (only a downed loopback: no sockets reach anything).
- ``mount``: a private mount namespace in which every world-writable temp dir (/tmp, /var/tmp,
  /dev/shm, /run/lock) is replaced by a small empty tmpfs that only root may write, the run's
  copy is bound back at its own path, and its scratch dir is a small tmpfs of its own (so writes
  there vanish with the run and cannot fill the host's disk).
- ``fs`` (with ``mount``): instead, a minimal file tree (`rootfs.py`): system directories and the
  interpreter read-only, the run's copy, nothing else (no data folder, package source, caches,
  other runs' copies, homes); entered with ``pivot_root``.
- ``uid``: run as a fresh, unused uid/gid (root only). The copy is read-only to it except its
  scratch dir, nothing else on the machine belongs to it, it cannot signal or ptrace other
  processes, and ``RLIMIT_NPROC`` then really caps its process count.
- always: rlimits (address space, CPU, processes, file size, open files, no core dumps), a new
  session (process group), ``PR_SET_NO_NEW_PRIVS`` and a parent-death signal.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
from collections.abc import Callable
from dataclasses import dataclass

from cm_gym.evaluators import _syscalls as sc
from cm_gym.evaluators.rootfs import RootPlan, enter_root

#: world-writable places a sandboxed process could otherwise write to
TEMP_DIRS: tuple[str, ...] = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


@dataclass(frozen=True)
class RLimits:
    """Per-process resource limits applied in the child (bytes / seconds / counts)."""

    address_space: int
    cpu_seconds: int
    processes: int
    file_size: int
    open_files: int = 256


@dataclass(frozen=True)
class IsolationPlan:
    """Which optional layers to apply. `uid` is the fresh uid to run as (None: keep ours)."""

    net: bool = False
    mount: bool = False
    uid: int | None = None
    userns: bool = False
    fs: bool = False

    def describe(self) -> str:
        """Short human-readable list of the applied layers."""
        parts = ["rlimits", "new-session", "no-new-privs"]
        if self.userns:
            parts.append("user-namespace")
        if self.net:
            parts.append("network-namespace")
        if self.fs:
            parts.append("minimal-root")
        elif self.mount:
            parts.append("private-tmp")
        if self.uid is not None:
            parts.append(f"uid={self.uid}")
        return "+".join(parts)


def libc_available() -> bool:
    """True when namespaces and mounts can at least be attempted (Linux with a C library)."""
    return sc.available()


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_user_namespace(uid: int, gid: int) -> None:
    """Unprivileged fallback: become root of a fresh user namespace (needed for the others)."""
    sc.unshare(sc.CLONE_NEWUSER)
    with contextlib.suppress(OSError):
        _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")


def _private_temp_dirs(workdir: str, tmpfs_bytes: int, uid: int | None) -> None:
    """Replace each world-writable temp dir by a small empty tmpfs, bind the copy back, and give
    the copy's scratch dir its own small tmpfs (so writes there cannot fill the host's disk)."""
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE, None)
    covered = False
    for d in TEMP_DIRS:
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        opts = f"size={tmpfs_bytes},nr_inodes=4096,mode=0755"
        sc.mount("tmpfs", d, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, opts)
        if workdir == d or workdir.startswith(d.rstrip("/") + "/"):
            covered = True
    if covered:
        # the child's cwd still is the real copy (chdir happened before the mounts): bind it back
        os.makedirs(workdir, mode=0o755, exist_ok=True)
        sc.mount(".", workdir, None, sc.MS_BIND | sc.MS_REC, None)
        os.chdir(workdir)
    scratch = os.path.join(workdir, "scratch")
    if os.path.isdir(scratch):
        owner = f",uid={uid},gid={uid},mode=0700" if uid is not None else ",mode=0777"
        sc.mount(
            "tmpfs", scratch, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, f"size={tmpfs_bytes},nr_inodes=4096{owner}"
        )


def _set_limits(limits: RLimits) -> None:
    pairs = [
        (resource.RLIMIT_AS, limits.address_space),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, limits.processes),
    ]
    for res, value in pairs:
        hard = value + 1 if res == resource.RLIMIT_CPU else value
        resource.setrlimit(res, (value, hard))


def make_preexec(
    plan: IsolationPlan,
    limits: RLimits,
    workdir: str,
    tmpfs_bytes: int = 16 << 20,
    root: RootPlan | None = None,
    newroot: str = "",
) -> Callable[[], None]:
    """The function run in the child between fork and exec. Raises (aborting the spawn) when a
    planned layer cannot be applied, so a run never silently gets less isolation than reported."""
    outer_uid, outer_gid = os.getuid(), os.getgid()

    def preexec() -> None:
        # restore default signal dispositions Python changed (SIGPIPE, SIGXFSZ are ignored by it)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        flags = 0
        if plan.userns:
            _enter_user_namespace(outer_uid, outer_gid)
        if plan.net:
            flags |= sc.CLONE_NEWNET | sc.CLONE_NEWIPC
        if plan.mount:
            flags |= sc.CLONE_NEWNS
        if flags:
            sc.unshare(flags)
        if plan.mount and plan.fs and root is not None:
            enter_root(root, newroot, workdir, tmpfs_bytes, plan.uid)
        elif plan.mount:
            _private_temp_dirs(workdir, tmpfs_bytes, plan.uid)
        _set_limits(limits)
        if plan.uid is not None:
            os.setgroups([])
            os.setgid(plan.uid)
            os.setuid(plan.uid)
        sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)

    return preexec


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True  # gone meanwhile


def processes_of_uid(uid: int, *, include_zombies: bool = False) -> list[int]:
    """Pids of live processes owned by `uid` (to find strays that left the process group).
    Zombies (dead, waiting to be reaped by init) are left out unless asked for."""
    pids: list[int] = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return pids
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids if include_zombies else [p for p in pids if not _is_zombie(p)]


def kill_uid(uid: int) -> int:
    """SIGKILL every process owned by `uid` (root only); returns how many were found.

    Uses a helper that becomes `uid` and calls ``kill(-1, SIGKILL)``, which the kernel applies to
    all of that uid's processes at once (a fork bomb cannot outrun it), then sweeps what is left.
    """
    found = processes_of_uid(uid)
    if not found:
        return 0
    for _ in range(5):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        if not processes_of_uid(uid):
            break
    return len(found)
