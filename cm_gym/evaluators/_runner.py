"""In-sandbox Python test runner (stdlib only; copied into each sandbox as ``_cm_runner.py``).

Usage: ``python -I -S _cm_runner.py REPORT_FD`` in the sandbox copy, with ``_cm_config.json``
next to it and a nonce on stdin. The runner itself never imports the code under test: every test
runs in a forked child (own process group, CPU limit, wall timeout) that imports the code, runs
one test and sends one line back on a private pipe. The runner then writes ``nonce\\n`` + a JSON
list of per-test results to REPORT_FD, a pipe only it holds (closed in every test child), so
output printed by the code under test can never pass for a report.

Modes:
- ``cases``: the child evaluates an expression (e.g. ``f(*input_data)``) and sends the value,
  encoded strictly (exact builtin types only); the *parent* compares it with the expected value,
  which never enters the sandbox.
- ``pytest``: the child runs a test function of a test file (assertions rewritten by the parent
  to `__cm_eq__` / `__cm_truth__`, which refuse objects with overridden ``__eq__``/``__bool__``).
  Verdicts are decided inside the child here; see the sandbox docs for what that can't rule out.
"""

import collections
import contextlib
import json
import os
import select
import signal
import sys
import time
import traceback

_type, _len, _repr, _str, _isinstance = type, len, repr, str, isinstance
# exact types whose equality the code under test cannot redefine (all implemented in C)
_DICTS = (dict, collections.defaultdict, collections.OrderedDict)
_PLAIN = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    list,
    tuple,
    set,
    frozenset,
    collections.deque,
) + _DICTS
MAX_NODES = 200_000
_APPROX = None  # the shim's Approx class, captured before the code under test is imported


class Unencodable(Exception):
    pass


def encode(value, depth=0, budget=None):
    """Strict, tagged JSON form of a plain value (tuples, sets, dicts keep their type)."""
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > 200:
        raise Unencodable("value too large or too deep")
    t = _type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        if abs(value) > 10**4000:
            raise Unencodable("integer too large")
        return value
    if t is float:
        return {"float": _repr(value)}
    if t is list:
        return [encode(v, depth + 1, budget) for v in value]
    if t is tuple:
        return {"tuple": [encode(v, depth + 1, budget) for v in value]}
    if t in _DICTS:
        return {
            "dict": [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)] for k, v in value.items()]
        }
    if t is collections.deque:
        return [encode(v, depth + 1, budget) for v in value]
    if t is set or t is frozenset:
        return {t.__name__: [encode(v, depth + 1, budget) for v in value]}
    if t is bytes:
        return {"bytes": value.hex()}
    if t is complex:
        return {"complex": [value.real, value.imag]}
    raise Unencodable("not a plain value: " + t.__name__)


def is_plain(value, depth=0):
    t = _type(value)
    if t not in _PLAIN or depth > 200:
        return False
    if t in (list, tuple, set, frozenset, collections.deque):
        return all(is_plain(v, depth + 1) for v in value)
    if t in _DICTS:
        return all(is_plain(k, depth + 1) and is_plain(v, depth + 1) for k, v in value.items())
    return True


def _identity_eq(t):
    return getattr(t, "__eq__", None) is object.__eq__


def cm_eq(a, b):
    """``a == b`` that cannot be fooled by an object overriding ``__eq__`` (raises instead)."""
    if _APPROX is not None and _type(b) is _APPROX:
        return _type(a) in (int, float) and b.matches(a)
    if is_plain(a) and is_plain(b):
        return a == b
    for side in (a, b):
        if not is_plain(side) and not _identity_eq(_type(side)):
            raise AssertionError(f"untrusted comparison: {_type(side).__name__} overrides __eq__")
    return a is b


def cm_truth(x):
    """``bool(x)`` for plain values and for objects without ``__bool__``/``__len__`` (raises for
    objects whose truth value is user-defined)."""
    if is_plain(x):
        return bool(x)
    t = _type(x)
    if getattr(t, "__bool__", None) is None and getattr(t, "__len__", None) is None:
        return True
    raise AssertionError(f"untrusted truth value: {t.__name__} defines __bool__/__len__")


def _describe(exc):
    try:
        text = _str(exc)
    except BaseException:
        text = "<unprintable>"
    return _type(exc).__name__ + (": " + text if text else "")


def _assert_site(tb, path):
    """The failing assert's line in the test file, for feedback."""
    try:
        frames = [f for f in traceback.extract_tb(tb) if f.filename.endswith(path)]
        if frames:
            return f"line {frames[-1].lineno}: {(frames[-1].line or '').strip()}"
    except BaseException:
        pass
    return ""


def run_case(cfg, case):
    import importlib

    mod = importlib.import_module(cfg["module"])
    fn = getattr(mod, cfg["function"])
    ns = {cfg["function"]: fn, "input_data": case["input"], "__builtins__": __builtins__}
    value = eval(case["expr"], ns)
    return {"status": "value", "value": encode(value)}


_TEST_MODULES = {}


def _load_test_module(path):
    """Import the test file once per test process (as pytest does)."""
    global _APPROX
    import importlib
    import importlib.util

    if path in _TEST_MODULES:
        return _TEST_MODULES[path]
    _APPROX = getattr(importlib.import_module("pytest"), "Approx", None)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__["__cm_eq__"] = cm_eq
    mod.__dict__["__cm_truth__"] = cm_truth
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _TEST_MODULES[path] = mod
    return mod


def run_pytest(cfg, test):
    path = cfg["test_file"]
    mod = _load_test_module(path)
    fn = getattr(mod, test["func"])
    kwargs = {}
    if test.get("index") is not None:
        names, values = fn._cm_params
        row = values[test["index"]]
        row = row if len(names) > 1 else [row]
        kwargs = dict(zip(names, row, strict=False))
    try:
        fn(**kwargs)
    except AssertionError as exc:
        site = _assert_site(exc.__traceback__, path)
        why = _describe(exc)
        why = "" if why == "AssertionError" else " (" + why + ")"
        return {"status": "fail", "message": ("AssertionError at " + site + why) if site else _describe(exc)}
    return {"status": "pass"}


def child(cfg, tests, wfd, report_fd, token):
    """Run `tests` in order in this (forked) process, one result line each, then exit."""
    write, dumps, exit_, enumerate_ = os.write, json.dumps, os._exit, enumerate
    try:
        os.setpgid(0, 0)
        os.close(report_fd)
        import resource

        cpu = int(float(cfg["per_test_timeout"]) * len(tests)) + 1
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard != resource.RLIM_INFINITY:
            cpu = min(cpu, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
        sys.path[:0] = cfg["sys_path"]
    except BaseException:
        exit_(3)
    run = run_case if cfg["mode"] == "cases" else run_pytest  # bound before any code under test runs
    for i, test in enumerate_(tests):
        try:
            result = run(cfg, test)
        except Unencodable as exc:
            result = {"status": "error", "message": "result is " + _str(exc)}
        except BaseException as exc:  # noqa: BLE001 - anything the code under test raises fails the test
            result = {"status": "error", "message": _describe(exc)[:2000]}
        try:
            data = f"{token} {i} {dumps(result)}\n".encode()
        except BaseException:
            data = (
                token + " " + _str(i) + ' {"status": "error", "message": "unreportable result"}\n'
            ).encode()
        while data:
            n = write(wfd, data)
            data = data[n:]
    exit_(0)


def _kill(pid):
    for target in (-pid, pid):
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 0
    return status


def _exit_message(status):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = {signal.SIGXCPU: "CPU limit", signal.SIGSEGV: "segmentation fault"}.get(sig, "signal")
        return f"test process killed by signal {sig} ({why})"
    return f"test process exited (status {os.WEXITSTATUS(status)}) before reporting"


def run_batch(cfg, tests, report_fd, budget_end):
    """Run tests in one forked child; returns the results received and why it stopped early
    (a per-test timeout or a crash is charged to the test that was running)."""
    token = os.urandom(16).hex()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(cfg, tests, w, report_fd, token)
    os.close(w)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    per_test = float(cfg["per_test_timeout"])
    cap = int(cfg.get("max_value_bytes", 4_000_000))
    results, buf, size, stop, budget_hit = [], b"", 0, "", False
    deadline = min(time.monotonic() + per_test, budget_end)
    while len(results) < len(tests):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stop = "timeout"
            budget_hit = deadline >= budget_end
            break
        ready, _, _ = select.select([r], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            stop = "eof"
            break
        size += len(chunk)
        if size > cap:
            stop = "too-large"
            break
        buf += chunk
        while b"\n" in buf and len(results) < len(tests):
            line, buf = buf.split(b"\n", 1)
            text = line.decode("utf-8", "replace")
            parts = text.split(" ", 2)
            if len(parts) != 3 or parts[0] != token or parts[1] != str(len(results)):
                continue
            try:
                res = json.loads(parts[2])
            except ValueError:
                res = {"status": "error", "message": "unreadable result"}
            res["name"] = tests[len(results)]["name"]
            results.append(res)
            size = len(buf)
            deadline = min(time.monotonic() + per_test, budget_end)
    os.close(r)
    status = _kill(pid)
    if len(results) < len(tests):
        name = tests[len(results)]["name"]
        if stop == "timeout":
            why = f"timed out after {per_test}s" if not budget_hit else "time budget exhausted"
            results.append({"name": name, "status": "timeout", "message": why})
        elif stop == "too-large":
            results.append({"name": name, "status": "error", "message": "result too large"})
        else:
            results.append({"name": name, "status": "crash", "message": _exit_message(status)})
    return results


def run_all(cfg, report_fd):
    tests = cfg["tests"]
    budget_end = time.monotonic() + float(cfg.get("budget_s", 1e9))
    max_timeouts = int(cfg.get("max_timeouts", 1_000_000))
    results = []
    while len(results) < len(tests):
        timeouts = sum(1 for r in results if r["status"] == "timeout")
        why = ""
        if time.monotonic() >= budget_end:
            why = "not run: time budget exhausted"
        elif timeouts >= max_timeouts:
            why = f"not run: {timeouts} earlier tests timed out"
        if why:
            for t in tests[len(results) :]:
                results.append({"name": t["name"], "status": "timeout", "message": why})
            break
        results.extend(run_batch(cfg, tests[len(results) :], report_fd, budget_end))
    return results


def main():
    report_fd = int(sys.argv[1])
    nonce = sys.stdin.readline().strip()
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<runner>/fd unreachable
    except BaseException:
        pass
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    with open("_cm_config.json", encoding="utf-8") as f:
        cfg = json.load(f)
    results = run_all(cfg, report_fd)
    data = (nonce + "\n" + json.dumps(results) + "\n").encode()
    while data:
        n = os.write(report_fd, data)
        data = data[n:]
    os.close(report_fd)


if __name__ == "__main__":
    main()
