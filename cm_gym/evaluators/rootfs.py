"""A minimal file tree for sandboxed processes: what they may see, built in a private mount
namespace before ``exec`` and entered with ``pivot_root`` (the old tree is then unmounted).

Visible, read-only: the system directories the interpreter and tools need (``/usr``, ``/bin``,
``/sbin``, ``/lib*``, ``/etc``), the Python installation the sandbox interpreter comes from (for
example a pyenv prefix under ``/root``), any extra tool directories a caller names, the devices
``null``, ``zero``, ``random``, ``urandom``, and a ``/proc`` that shows only the sandbox's own
processes (``hidepid=2``; left out where the kernel refuses it). Writable: nothing but the run's
own ``scratch/`` (a small tmpfs). The run's copy is bound at its own path. Everything else —
``/tmp`` and other runs' copies, ``/home``, ``/root``, ``/work``, the data folder, the package
source and its generated references, caches — does not exist. Inside a visible directory, these
are hidden behind empty read-only mounts: every Python ``site-packages``/``dist-packages``
(an installed cm_gym and its data live there), the cm_gym package and its checkout, the data
folder (``CM_GYM_DATA``) and the cache folder (``CM_GYM_CACHE``), plus any caller-named paths.

`plan_root` runs in the parent (paths resolved, nothing mounted); `enter_root` runs in the
forked child and only makes syscalls.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from cm_gym.evaluators import _syscalls as sc

SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES: tuple[str, ...] = ("null", "zero", "random", "urandom", "full")


@dataclass(frozen=True)
class RootPlan:
    """What the minimal tree contains: ``binds`` (read-only directory binds), ``links`` (symbolic
    links such as ``/bin -> usr/bin``), ``hidden`` (paths covered by an empty mount)."""

    binds: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    hidden: tuple[str, ...]


def _real(path: str) -> str:
    return os.path.realpath(path)


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def sensitive_paths() -> list[str]:
    """Paths no sandboxed process may read: site-packages, the package, data and caches."""
    here = _real(os.path.join(os.path.dirname(__file__), ".."))  # the cm_gym package
    found = [here, os.path.dirname(here)]
    for var in ("CM_GYM_DATA", "CM_GYM_CACHE"):
        if os.environ.get(var):
            found.append(_real(os.path.expanduser(os.environ[var])))
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/usr/local"}
    for prefix in prefixes:
        for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
                        "local/lib/python3*/dist-packages", "lib64/python3*/site-packages"):  # fmt: skip
            found.extend(_real(p) for p in glob.glob(os.path.join(prefix, pattern)))
    return sorted({p for p in found if os.path.isdir(p)})


def plan_root(extra: Iterable[str] = (), hide: Iterable[str] = ()) -> RootPlan:
    """The minimal tree for this machine (see module doc); `extra` are further read-only dirs."""
    binds: list[str] = []
    links: list[tuple[str, str]] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            links.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            binds.append(d)
    for d in (sys.base_prefix, sys.base_exec_prefix, *extra):
        real = _real(d)
        if os.path.isdir(real) and not _under(real, binds):
            binds.append(real)
    covered = [_real(b) for b in binds]
    hidden = [p for p in (*sensitive_paths(), *(_real(h) for h in hide)) if _under(p, covered)]
    # a hidden path that contains a bound one (the checkout holding the interpreter) stays visible
    hidden = [h for h in hidden if not any(_under(b, [h]) for b in covered)]
    return RootPlan(tuple(binds), tuple(links), tuple(sorted(set(hidden))))


def enter_root(plan: RootPlan, newroot: str, workdir: str, scratch_bytes: int, uid: int | None) -> None:
    """In the forked child, inside a fresh mount namespace: build the tree at `newroot` (an
    empty directory), bind the copy `workdir` at its own path, pivot into it."""
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE, None)
    sc.mount("tmpfs", newroot, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=4m,nr_inodes=4096,mode=0755")
    for src in plan.binds:
        dst = newroot + src
        os.makedirs(dst, exist_ok=True)
        sc.mount(src, dst, None, sc.MS_BIND | sc.MS_REC, None)
        sc.mount(None, dst, None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID, None)
    for path, target in plan.links:
        if not os.path.lexists(newroot + path):
            os.symlink(target, newroot + path)
    for path in plan.hidden:
        if os.path.isdir(newroot + path):
            sc.mount("tmpfs", newroot + path, "tmpfs", sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV,
                     "size=4k,nr_inodes=16,mode=0555")  # fmt: skip
    os.makedirs(newroot + "/dev", exist_ok=True)
    for dev in DEVICES:
        if os.path.exists("/dev/" + dev):
            with open(newroot + "/dev/" + dev, "w"):
                pass
            sc.mount("/dev/" + dev, newroot + "/dev/" + dev, None, sc.MS_BIND, None)
    for tmp in ("/tmp", "/dev/shm"):
        os.makedirs(newroot + tmp, exist_ok=True)
        sc.mount(
            "tmpfs", newroot + tmp, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=64k,nr_inodes=64,mode=0755"
        )
    os.makedirs(newroot + "/proc", exist_ok=True)
    with contextlib.suppress(OSError):  # without it there is no /proc: Python does not need one
        sc.mount("proc", newroot + "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, "hidepid=2")
    os.makedirs(newroot + workdir, exist_ok=True)
    sc.mount(workdir, newroot + workdir, None, sc.MS_BIND | sc.MS_REC, None)
    scratch = os.path.join(newroot + workdir, "scratch")
    if os.path.isdir(scratch):
        owner = f",uid={uid},gid={uid},mode=0700" if uid is not None else ",mode=0777"
        sc.mount(
            "tmpfs",
            scratch,
            "tmpfs",
            sc.MS_NOSUID | sc.MS_NODEV,
            f"size={scratch_bytes},nr_inodes=4096{owner}",
        )
    os.chdir(newroot)
    sc.pivot_root(".", ".")
    sc.umount2(".", sc.MNT_DETACH)
    os.chdir(workdir)
