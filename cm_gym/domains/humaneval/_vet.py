"""Worker module (run in a `cm_gym.evaluators.worker.Worker`, never in the caller's process):
runs one *trusted-derived* program — HumanEval's canonical solution or one of our own mutations
of it — on a task's cases, to vet injected bugs at load time. Not a verdict path: verdicts on
agents' programs come from the judge and the sandbox (`cm_gym.evaluators.judge`). Deadlines are
CPU time of this process (``ITIMER_PROF``), so which bugs are kept does not depend on machine load."""

from __future__ import annotations

import copy
import signal
from typing import Any

from cm_gym.evaluators.testrun import Case, compare


class _Deadline(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Deadline


def run_cases(program: str, function: str, cases: list[list[Any]], per_case_s: float) -> list[bool]:
    """Whether `program` passes each case ``[name, expr, input, expected]`` (fresh namespace)."""
    ns: dict[str, Any] = {"__name__": "solution"}
    old = signal.signal(signal.SIGPROF, _alarm)
    try:
        signal.setitimer(signal.ITIMER_PROF, per_case_s * 4)
        try:
            exec(compile(program, "solution.py", "exec"), ns)  # noqa: S102 - trusted-derived code
        except BaseException:  # noqa: BLE001 - a mutant that fails to load fails every case
            return [False] * len(cases)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        out = []
        for name, expr, inp, expected in cases:
            case = Case(name, expr, inp, expected)
            signal.setitimer(signal.ITIMER_PROF, per_case_s)
            try:
                got = eval(expr, {**ns, "input_data": copy.deepcopy(inp)})  # noqa: S307
                ok, _ = compare(case, got, function)
            except BaseException:  # noqa: BLE001 - a raise or a deadline fails the case
                ok = False
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            out.append(bool(ok))
        return out
    finally:
        signal.signal(signal.SIGPROF, old)


def run_check(program: str, test_source: str, function: str, limit_s: float) -> list[bool]:
    """Whether `program` passes HumanEval's own ``check`` (run as upstream's harness does, program
    and test in one namespace — acceptable here only because both are trusted-derived)."""
    ns: dict[str, Any] = {"__name__": "solution"}
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    try:
        exec(compile(program, "solution.py", "exec"), ns)  # noqa: S102 - trusted-derived code
        exec(compile(test_source, "test.py", "exec"), ns)  # noqa: S102 - HumanEval's own test
        ns["check"](ns[function])
        return [True]
    except BaseException:  # noqa: BLE001 - an assert, a raise or the deadline fails it
        return [False]
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
