"""The few Linux syscalls the sandbox needs, through ctypes (safe to call between fork and exec:
no allocation beyond argument encoding, no locks)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
#: pivot_root's syscall number (no libc wrapper)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "armv7l": 218, "ppc64le": 203, "s390x": 217}.get(
    platform.machine(), -1
)

try:
    LIBC: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
except OSError:  # pragma: no cover - non-glibc platforms
    LIBC = None


def available() -> bool:
    """True when namespaces and mounts can at least be attempted (Linux with a C library)."""
    return LIBC is not None and hasattr(LIBC, "unshare") and os.name == "posix"


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    assert LIBC is not None
    _check(LIBC.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    assert LIBC is not None
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(LIBC.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def umount2(target: str, flags: int) -> None:
    assert LIBC is not None
    _check(LIBC.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    assert LIBC is not None
    if SYS_PIVOT_ROOT < 0:
        raise OSError(38, "pivot_root: unknown syscall number on this machine")
    _check(LIBC.syscall(ctypes.c_long(SYS_PIVOT_ROOT), new_root.encode(), put_old.encode()), "pivot_root")


def prctl(option: int, arg: int) -> None:
    if LIBC is not None:
        LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0))
