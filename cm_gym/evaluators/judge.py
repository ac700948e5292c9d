"""The judge: runs a task's tests against an untrusted program and decides every verdict in a
trusted process of its own (a `Worker`), never in the program's process.

The program runs in a sandbox (`ProgramSession`) and is only ever *called*: in *cases* mode the
judge sends each case's expression and input and compares the returned value with the expected
one, which never leaves this process; in *pytest* mode the task's test file (trusted upstream code)
is imported here, with the program's module replaced by a proxy whose functions are remote calls,
so the test's own assertions run here on values the program sent back by value. Nothing the
program does — walking its interpreter's frames, overwriting comparison helpers, printing fake
reports — can reach a verdict: they live in another process, under another uid, and its replies
are read as bounded plain data. A per-test wall-clock deadline holds for the judge's own work on
the test too (an alarm, in both modes: reading and decoding the reply, comparing it), so a cyclic
structure sent back cannot hang a trusted test loop; decoding does no unbounded work in C (where an
alarm cannot interrupt it: `wire.py`).

In pytest mode only the entry point and the functions the suite lists as the program's come from
the program: names the test file binds from elsewhere (HumanEval's helpers such as ``poly`` or
``encode_shift``, imported from a frozen copy of the task's reference module among the suite's
judge-side files) are the judge's own, so a program that redefines them changes nothing the test
calls.
"""

from __future__ import annotations

import builtins
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cm_gym.evaluators import _pytest_shim
from cm_gym.evaluators.program import CallResult, ProgramSession
from cm_gym.evaluators.sandbox import Limits, Sandbox
from cm_gym.evaluators.testrun import TestSuite, compare

_SANDBOXES: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Sandbox] = {}
_SAFE_EXCEPTIONS = {
    name: obj for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, Exception)
}


class _Stop(BaseException):
    """A test ended by the judge (deadline, or a failed remote call); not catchable by tests'
    ``except Exception``."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class ProgramError(Exception):
    """The program raised an exception the judge cannot rebuild (not a builtin type)."""


def module_of(program_path: str) -> str:
    """``python_programs/x.py`` → ``python_programs.x``."""
    return program_path[:-3].replace("/", ".") if program_path.endswith(".py") else program_path


def _sandbox(mode: str, extra: tuple[str, ...], hide: tuple[str, ...]) -> Sandbox:
    key = (mode, extra, hide)
    if key not in _SANDBOXES:
        _SANDBOXES[key] = Sandbox(isolation=mode, extra_paths=extra, hide_paths=hide)
    return _SANDBOXES[key]


def judge_suite(request: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point: run ``request["suite"]`` against ``request["program"]``; per-test
    ``[name, status, message]`` (status pass / fail / error / timeout / crash / memory) and
    what the run cost."""
    t0 = time.perf_counter()
    suite = TestSuite.from_dict(request["suite"])
    limits = Limits(**request["limits"])
    sandbox = _sandbox(request.get("isolation", "auto"), tuple(request.get("extra_paths", ())), ())
    files = {**dict(suite.sandbox_files), suite.program_path: request["program"]}
    names = suite.names()
    cpu = float(suite.per_test_timeout) * max(1, len(names)) + 1
    prog = ProgramSession(sandbox, files, suite.module or module_of(suite.program_path), limits=limits,
                          sys_path=suite.sys_path, uid=request.get("uid"), cpu_s=cpu,
                          parent_dir=request.get("parent_dir"))  # fmt: skip
    budget_end = t0 + limits.wall_s
    try:
        if suite.mode == "cases":
            results = _run_cases(prog, suite, budget_end, limits)
        else:
            results = _run_pytest(prog, suite, budget_end, limits, request.get("parent_dir"))
    finally:
        prog.close()
    return {"results": results, "isolation": sandbox.isolation, "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": prog.peak_rss_mb, "strays": prog.strays, "starts": prog.starts}  # fmt: skip


def _stop_reason(results: list[list[str]], suite: TestSuite, budget_end: float) -> str:
    if time.perf_counter() >= budget_end:
        return "not run: time budget exhausted"
    timeouts = sum(1 for r in results if r[1] == "timeout")
    if timeouts >= suite.max_timeouts:
        return f"not run: {timeouts} earlier tests timed out"
    return ""


def _failed_call(res: CallResult, per_test: float, limits: Limits) -> tuple[str, str]:
    if res.status == "raise":
        return "error", f"{res.error_type}: {res.message}" if res.message else res.error_type
    if res.status == "timeout":
        return "timeout", f"timed out after {per_test:g}s"
    if res.status == "memory":
        return "memory", f"the program's processes used more than {limits.memory_mb} MB (killed)"
    if res.status == "crash":
        return "crash", res.message or "the program process died"
    return "error", res.message or "the program's answer could not be read"


def _run_cases(prog: ProgramSession, suite: TestSuite, budget_end: float, limits: Limits) -> list[list[str]]:
    results: list[list[str]] = []
    per_test = float(suite.per_test_timeout)
    for case in suite.cases:
        why = _stop_reason(results, suite, budget_end)
        if why:
            results.append([case.name, "timeout", why])
            continue
        timeout = min(per_test, budget_end - time.perf_counter())
        try:
            with _deadline(timeout + 0.5):
                results.append([case.name, *_run_case(prog, case, suite, timeout, limits)])
        except _Stop:
            prog._stop()  # interrupted mid-call or mid-decode: the process state is unknown
            results.append([case.name, "timeout", f"timed out after {per_test:g}s (checking the result)"])
    return results


def _run_case(prog: ProgramSession, case: Any, suite: TestSuite, timeout: float, limits: Limits) -> list[str]:
    res = prog.eval(case.expr, {"input_data": case.input}, function=suite.function, timeout=timeout)
    if not res.ok:
        return list(_failed_call(res, float(suite.per_test_timeout), limits))
    try:
        ok, msg = compare(case, res.value, suite.function)
    except (RecursionError, MemoryError, Exception) as exc:  # noqa: BLE001 - a hostile value
        ok, msg = False, f"the result cannot be compared ({type(exc).__name__})"
    return ["pass" if ok else "fail", "" if ok else msg]


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise `_Stop` ("timeout") in this (main) thread after `seconds` of wall-clock time."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# -- pytest mode -------------------------------------------------------------------------------
class _RemoteFunction:
    """A function of the program, called in the sandbox (see module doc)."""

    def __init__(self, test: _PytestRun, name: str) -> None:
        self._test, self.__name__ = test, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = self._test
        remaining = run.deadline - time.perf_counter()
        if remaining <= 0:
            raise _Stop("timeout", f"timed out after {run.per_test:g}s")
        try:
            res = run.prog.call(self.__name__, args, kwargs, timeout=remaining)
        except BaseException:
            run.prog._stop()  # interrupted mid-call: the process state is unknown
            raise
        if res.ok:
            return res.value
        if res.status == "raise":
            exc_type = _SAFE_EXCEPTIONS.get(res.error_type)
            raise exc_type(res.message) if exc_type else ProgramError(f"{res.error_type}: {res.message}")
        raise _Stop(*_failed_call(res, run.per_test, run.limits))


class _PytestRun:
    def __init__(self, prog: ProgramSession, suite: TestSuite, limits: Limits) -> None:
        self.prog, self.suite, self.limits = prog, suite, limits
        self.per_test = float(suite.per_test_timeout)
        self.deadline = 0.0


@contextmanager
def _test_module(run: _PytestRun, parent_dir: str | None) -> Iterator[Any]:
    """The suite's test file imported here, from a private copy, with the program's module a proxy."""
    suite = run.suite
    tmp = tempfile.mkdtemp(prefix="cm_gym_judge_", dir=parent_dir)
    os.chmod(tmp, 0o700)
    before, path_before = set(sys.modules), list(sys.path)
    try:
        for rel, text in suite.files.items():
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        sys.path[:0] = [str(Path(tmp) / p) for p in suite.sys_path]
        sys.modules["pytest"] = _pytest_shim
        module = suite.module or module_of(suite.program_path)
        parts = module.split(".")
        for i in range(1, len(parts)):
            pkg = types.ModuleType(".".join(parts[:i]))
            pkg.__path__ = []
            sys.modules.setdefault(pkg.__name__, pkg)
        proxy = types.ModuleType(module)
        proxy.__getattr__ = lambda name: _RemoteFunction(run, name)  # type: ignore[attr-defined]
        sys.modules[module] = proxy
        test_path = Path(tmp) / suite.test_file
        spec = importlib.util.spec_from_file_location(test_path.stem, test_path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod, str(test_path)
    finally:
        for name in set(sys.modules) - before:
            sys.modules.pop(name, None)
        sys.path[:] = path_before
        shutil.rmtree(tmp, ignore_errors=True)


def _alarm(signum: int, frame: Any) -> None:
    raise _Stop("timeout", "timed out")


def _site(tb: Any, path: str) -> str:
    frames = [f for f in traceback.extract_tb(tb) if f.filename == path]
    return f"line {frames[-1].lineno}: {(frames[-1].line or '').strip()}" if frames else ""


def _run_one(run: _PytestRun, fn: Any, kwargs: dict[str, Any], path: str) -> tuple[str, str]:
    remaining = min(run.per_test, run.deadline - time.perf_counter())
    try:
        with _deadline(remaining + 0.5):
            fn(**kwargs)
        return "pass", ""
    except AssertionError as exc:
        site = _site(exc.__traceback__, path)
        text = str(exc)
        return "fail", ("AssertionError at " + site if site else "AssertionError") + (
            f" ({text})" if text else ""
        )
    except _Stop as stop:
        message = f"timed out after {run.per_test:g}s" if stop.status == "timeout" else stop.message
        return stop.status, message
    except RecursionError:
        return "error", "RecursionError while checking the result"
    except BaseException as exc:  # noqa: BLE001 - the test (or the program's exception) failed it
        text = str(exc)[:500]
        return "error", type(exc).__name__ + (f": {text}" if text else "")


def _run_pytest(
    prog: ProgramSession, suite: TestSuite, budget_end: float, limits: Limits, parent_dir: str | None
) -> list[list[str]]:
    run = _PytestRun(prog, suite, limits)
    results: list[list[str]] = []
    try:
        with _test_module(run, parent_dir) as (mod, path):
            for name, func, index in suite.tests:
                why = _stop_reason(results, suite, budget_end)
                if why:
                    results.append([name, "timeout", why])
                    continue
                run.deadline = min(time.perf_counter() + run.per_test, budget_end)
                fn = getattr(mod, func)
                kwargs: dict[str, Any] = {}
                if index is not None:
                    names, values = fn._cm_params
                    row = values[index] if len(names) > 1 else [values[index]]
                    kwargs = dict(zip(names, row, strict=False))
                status, msg = _run_one(run, fn, kwargs, path)
                results.append([name, status, msg])
    except Exception as exc:  # noqa: BLE001 - the trusted test file itself failed to load
        done = {r[0] for r in results}
        why = f"the test file could not be loaded: {type(exc).__name__}: {str(exc)[:300]}"
        results += [[n, "error", why] for n, _, _ in suite.tests if n not in done]
    return results
