"""The worker process's main loop (stdlib only; `cm_gym.evaluators.worker` starts it as a script).

Usage: ``python -I _worker_main.py REQUEST_FD REPLY_FD PARENT_PID``. Frames on both pipes are an
8-byte little-endian length followed by a pickle. The first request is the set-up (sys.path, the
parent packages to stub, the module to import, the memory cap, an optional init function); every
later one is ``(function, args, kwargs, track_memory)``. Each reply is ``(status, value_or_message, peak_kb)``
with status "ok", "error" or "budget". The worker never imports the package ``__init__`` of its
target module's parents (they are stubbed with their real search paths), so a target module
that imports only light modules starts in tens of milliseconds.
"""

import contextlib
import ctypes
import importlib
import importlib.machinery
import importlib.util
import os
import pickle
import resource
import signal
import sys
import types

PR_SET_PDEATHSIG = 1


def _load_frames():
    """`_frames.py` next to this script, loaded by path (importing the package would run its
    ``__init__``)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_frames.py")
    spec = importlib.util.spec_from_file_location("_cm_frames", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_frames = _load_frames()


def _read_frame(fd):
    body = _frames.read_frame(fd)
    return None if body is None else pickle.loads(body)


def _status_kb(field):
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _stub_packages(packages):
    """Register each parent package as an empty namespace with its real search path."""
    for name, paths in packages:
        if name in sys.modules:
            continue
        mod = types.ModuleType(name)
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = list(paths)
        mod.__spec__, mod.__path__, mod.__package__ = spec, list(paths), name
        sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, mod)


def _limit_memory(memory_mb):
    """Cap the heap this process may still grow by `memory_mb` (RLIMIT_DATA counts private
    writable memory, unlike RLIMIT_AS it ignores reserved-but-unused address space)."""
    if not memory_mb:
        return
    used_kb = _status_kb(b"VmData:") or 0
    cap = used_kb * 1024 + int(memory_mb) * (1 << 20)
    for res in (getattr(resource, "RLIMIT_DATA", None), resource.RLIMIT_AS):
        if res is None:
            continue
        try:
            soft, hard = resource.getrlimit(res)
            if res == resource.RLIMIT_AS:  # only a safety net: reserved space can be large
                cap_as = (_status_kb(b"VmSize:") or 0) * 1024 + 4 * int(memory_mb) * (1 << 20)
                value = cap_as if hard == resource.RLIM_INFINITY else min(cap_as, hard)
            else:
                value = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
            resource.setrlimit(res, (value, hard))
        except (ValueError, OSError):
            pass


def _describe(exc):
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a str() that raises
        text = ""
    line = (type(exc).__name__ + (": " + text if text else "")).splitlines()
    return (line[0] if line else type(exc).__name__)[:500]


def _reply(fd, status, value, peak, max_bytes):
    try:
        data = pickle.dumps((status, value, peak), protocol=5)
    except Exception as exc:  # noqa: BLE001 - an unpicklable result
        data = pickle.dumps(("error", "the result cannot be sent back: " + _describe(exc), peak))
    if len(data) > max_bytes:
        data = pickle.dumps(("budget", f"the result is larger than {max_bytes} bytes", peak))
    _frames.write_frame(fd, data)


def main():
    req_fd, rep_fd, parent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with contextlib.suppress(Exception):  # not Linux: the parent still kills us on exit
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)
    setup = _read_frame(req_fd)
    if setup is None:
        os._exit(0)
    max_bytes = int(setup["max_reply_bytes"])
    try:
        sys.path[:] = list(setup["sys_path"])
        _stub_packages(setup["packages"])
        module = importlib.import_module(setup["module"])
        if setup.get("init"):
            getattr(module, setup["init"])(*setup.get("init_args", ()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        _reply(rep_fd, "error", "worker set-up failed: " + _describe(exc), None, max_bytes)
        os._exit(1)
    _limit_memory(setup.get("memory_mb"))
    _reply(rep_fd, "ok", os.getpid(), _status_kb(b"VmRSS:"), max_bytes)
    while True:
        request = _read_frame(req_fd)
        if request is None:
            os._exit(0)
        name, args, kwargs, track = request
        if track:
            _reset_peak()
        try:
            status, value = "ok", getattr(module, name)(*args, **kwargs)
        except MemoryError:
            status, value = "budget", f"the memory cap of {setup.get('memory_mb')} MB was exceeded"
        except BaseException as exc:  # noqa: BLE001 - everything the function raises is reported
            status, value = "error", _describe(exc)
        _reply(rep_fd, status, value, _status_kb(b"VmHWM:") if track else None, max_bytes)
        value = None


if __name__ == "__main__":
    main()
