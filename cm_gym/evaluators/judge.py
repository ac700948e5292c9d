"""The judge: runs a task's tests against an untrusted program and decides every verdict in a
trusted process of its own (a `Worker`), never in the program's process.

The program runs in a sandbox (`ProgramSession`) and is only ever *called*: in *cases* mode the
judge sends each case's expression and input and compares the returned value with the expected
one, which never leaves this process; in *pytest* mode the task's test file (trusted upstream code)
is imported here, with the program's module replaced by a proxy whose functions are remote calls,
so the test's own assertions run here on values the program sent back by value. Nothing the
program does — walking its interpreter's frames, overwriting comparison helpers, printing fake
reports — can reach a verdict: they live in another process, under another uid, and its replies
are read as bounded plain data.

Budgets (issue 25): each test may spend `per_test_timeout` seconds of the program's CPU time
(`ProgramSession`'s CPU meter) and the suite `Limits.cpu_s` in all; the judge's own work on a
test is bounded by the same amount of *its* CPU time (a ``SIGPROF`` interval timer), so a cyclic
structure sent back cannot hang a trusted test loop. None of these depends on machine load. Wall
time is only a hang guard (`hang_guard_s` per test, `Limits.wall_s` per suite): a test it stops
while the machine starved the program is "infrastructure", never a failed test.
Decoding does no unbounded work in C (where no timer can interrupt it: `wire.py`).

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
from cm_gym.evaluators.testrun import TestSuite, compare, suite_hang_guard_s

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
    ``[name, status, message, cpu_s]`` (status pass / fail / error / timeout / crash / memory /
    infrastructure; the program's CPU seconds in the test) and what the run cost."""
    t0 = time.perf_counter()
    suite = TestSuite.from_dict(request["suite"])
    limits = Limits(**request["limits"])
    sandbox = _sandbox(request.get("isolation", "auto"), tuple(request.get("extra_paths", ())), ())
    files = {**dict(suite.sandbox_files), suite.program_path: request["program"]}
    names = suite.names()
    cpu = float(suite.per_test_timeout) * max(1, len(names)) + 1  # RLIMIT_CPU of each program process
    prog = ProgramSession(sandbox, files, suite.module or module_of(suite.program_path), limits=limits,
                          sys_path=suite.sys_path, uid=request.get("uid"), cpu_s=cpu,
                          parent_dir=request.get("parent_dir"))  # fmt: skip
    budget_end = t0 + suite_hang_guard_s(suite, limits)
    try:
        if suite.mode == "cases":
            results = _run_cases(prog, suite, budget_end, limits)
        else:
            results = _run_pytest(prog, suite, budget_end, limits, request.get("parent_dir"))
    finally:
        prog.close()
    return {"results": results, "isolation": sandbox.isolation, "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": prog.peak_rss_mb, "strays": prog.strays, "starts": prog.starts}  # fmt: skip


class _Spent:
    """The program's CPU seconds over the whole suite (its budget is ``Limits.cpu_s``)."""

    def __init__(self, limits: Limits) -> None:
        self.budget, self.used = float(limits.cpu_s), 0.0

    def add(self, res: CallResult) -> None:
        self.used += float(res.cpu_s or 0.0)

    def left(self) -> float:
        return max(0.0, self.budget - self.used)


def _stop_reason(
    results: list[list[Any]], suite: TestSuite, budget_end: float, spent: _Spent
) -> tuple[str, str]:
    if time.perf_counter() >= budget_end:
        return "infrastructure", "not run: the suite's wall-clock hang guard passed"
    if spent.left() <= 0:
        return "timeout", f"not run: the suite's CPU budget of {spent.budget:g}s is spent"
    timeouts = sum(1 for r in results if r[1] == "timeout")
    if timeouts >= suite.max_timeouts:
        return "timeout", f"not run: {timeouts} earlier tests timed out"
    return "", ""


def _starved(suite: TestSuite) -> str:
    return f"the machine starved the test past its {suite.test_hang_guard_s():g}s wall-clock hang guard"


def _failed_call(res: CallResult, suite: TestSuite, limits: Limits) -> tuple[str, str]:
    if res.status == "raise":
        return "error", f"{res.error_type}: {res.message}" if res.message else res.error_type
    if res.status == "cpu":
        return "timeout", f"timed out: more than {float(suite.per_test_timeout):g}s of CPU time"
    if res.status == "timeout":
        return "timeout", f"timed out: blocked (not computing) for more than {suite.test_hang_guard_s():g}s"
    if res.status == "infrastructure":
        return "infrastructure", _starved(suite)
    if res.status == "memory":
        return "memory", f"the program's processes used more than {limits.memory_mb} MB (killed)"
    if res.status == "crash":
        return "crash", res.message or "the program process died"
    return "error", res.message or "the program's answer could not be read"


def _run_cases(prog: ProgramSession, suite: TestSuite, budget_end: float, limits: Limits) -> list[list[Any]]:
    results: list[list[Any]] = []
    per_test = float(suite.per_test_timeout)
    spent = _Spent(limits)
    for case in suite.cases:
        status, why = _stop_reason(results, suite, budget_end, spent)
        if why:
            results.append([case.name, status, why])
            continue
        timeout = min(suite.test_hang_guard_s(), budget_end - time.perf_counter())
        try:
            with _judge_cpu_budget(per_test + 0.5):
                res = prog.eval(case.expr, {"input_data": case.input}, function=suite.function, timeout=timeout,
                                cpu_s=min(per_test, spent.left()))  # fmt: skip
                spent.add(res)
                if not res.ok:
                    status, msg = _failed_call(res, suite, limits)
                    results.append([case.name, status, msg, res.cpu_s or 0.0])
                    continue
                try:
                    ok, msg = compare(case, res.value, suite.function)
                except (RecursionError, MemoryError, Exception) as exc:  # noqa: BLE001 - a hostile value
                    ok, msg = False, f"the result cannot be compared ({type(exc).__name__})"
        except _Stop:
            prog._stop()  # interrupted mid-decode or mid-compare: the process state is unknown
            results.append(
                [case.name, "timeout", f"the judge spent over {per_test:g}s of CPU checking the result", 0.0]
            )
            continue
        results.append([case.name, "pass" if ok else "fail", "" if ok else msg, res.cpu_s or 0.0])
    return results


@contextmanager
def _judge_cpu_budget(seconds: float) -> Iterator[None]:
    """Raise `_Stop` ("timeout") in this (main) thread once the judge itself has spent `seconds` of
    CPU time (``SIGPROF``: it does not advance while the judge waits for the program, so machine
    load cannot trigger it)."""
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, max(0.001, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


# -- pytest mode -------------------------------------------------------------------------------
class _RemoteFunction:
    """A function of the program, called in the sandbox (see module doc)."""

    def __init__(self, test: _PytestRun, name: str) -> None:
        self._test, self.__name__ = test, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = self._test
        remaining = run.deadline - time.perf_counter()
        cpu_left = min(run.per_test - run.test_cpu, run.spent.left())
        if remaining <= 0:
            raise _Stop("infrastructure", _starved(run.suite))
        if cpu_left <= 0:
            raise _Stop("timeout", f"timed out: more than {run.per_test:g}s of CPU time")
        try:
            res = run.prog.call(self.__name__, args, kwargs, timeout=remaining, cpu_s=cpu_left)
        except BaseException:
            run.prog._stop()  # interrupted mid-call: the process state is unknown
            raise
        run.test_cpu += float(res.cpu_s or 0.0)
        run.spent.add(res)
        if res.ok:
            return res.value
        if res.status == "raise":
            exc_type = _SAFE_EXCEPTIONS.get(res.error_type)
            raise exc_type(res.message) if exc_type else ProgramError(f"{res.error_type}: {res.message}")
        raise _Stop(*_failed_call(res, run.suite, run.limits))


class _PytestRun:
    def __init__(self, prog: ProgramSession, suite: TestSuite, limits: Limits) -> None:
        self.prog, self.suite, self.limits = prog, suite, limits
        self.per_test = float(suite.per_test_timeout)
        self.deadline = 0.0  # the test's wall-clock hang guard
        self.test_cpu = 0.0  # the program's CPU seconds in this test so far
        self.spent = _Spent(limits)


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
    raise _Stop("timeout", "timed out: the test's own work passed its CPU budget")


def _site(tb: Any, path: str) -> str:
    frames = [f for f in traceback.extract_tb(tb) if f.filename == path]
    return f"line {frames[-1].lineno}: {(frames[-1].line or '').strip()}" if frames else ""


def _run_one(run: _PytestRun, fn: Any, kwargs: dict[str, Any], path: str) -> tuple[str, str]:
    try:
        with _judge_cpu_budget(run.per_test + 0.5):  # the judge's own work on the test
            fn(**kwargs)
        return "pass", ""
    except AssertionError as exc:
        site = _site(exc.__traceback__, path)
        text = str(exc)
        return "fail", ("AssertionError at " + site if site else "AssertionError") + (
            f" ({text})" if text else ""
        )
    except _Stop as stop:
        return stop.status, stop.message
    except RecursionError:
        return "error", "RecursionError while checking the result"
    except BaseException as exc:  # noqa: BLE001 - the test (or the program's exception) failed it
        text = str(exc)[:500]
        return "error", type(exc).__name__ + (f": {text}" if text else "")


def _run_pytest(
    prog: ProgramSession, suite: TestSuite, budget_end: float, limits: Limits, parent_dir: str | None
) -> list[list[Any]]:
    run = _PytestRun(prog, suite, limits)
    results: list[list[Any]] = []
    try:
        with _test_module(run, parent_dir) as (mod, path):
            for name, func, index in suite.tests:
                status, why = _stop_reason(results, suite, budget_end, run.spent)
                if why:
                    results.append([name, status, why])
                    continue
                run.deadline = min(time.perf_counter() + suite.test_hang_guard_s(), budget_end)
                run.test_cpu = 0.0
                fn = getattr(mod, func)
                kwargs: dict[str, Any] = {}
                if index is not None:
                    names, values = fn._cm_params
                    row = values[index] if len(names) > 1 else [values[index]]
                    kwargs = dict(zip(names, row, strict=False))
                status, msg = _run_one(run, fn, kwargs, path)
                results.append([name, status, msg, round(run.test_cpu, 3)])
    except Exception as exc:  # noqa: BLE001 - the trusted test file itself failed to load
        done = {r[0] for r in results}
        why = f"the test file could not be loaded: {type(exc).__name__}: {str(exc)[:300]}"
        results += [[n, "error", why] for n, _, _ in suite.tests if n not in done]
    return results
