"""Worker module (run in a `cm_gym.evaluators.worker.Worker`, never in the caller's process):
computes expected outputs of new test inputs by running a generated task's reference — the
cm_gym authors' own shipped code — on them. A new input may be one the reference never halts on
(``collatz_steps(0)``) or raises for; each input runs under a deadline in CPU time of this
process (``ITIMER_PROF``), so which tests are added does not depend on machine load."""

from __future__ import annotations

import ast
import signal
from typing import Any

from cm_gym.evaluators.testrun import encode_expected


class _Deadline(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Deadline


def expected_outputs(reference: str, function: str, inputs: list[list[Any]], per_case_s: float) -> list[Any]:
    """For each argument list in `inputs`: ``[True, encoded value]``, or ``[False, reason]`` when
    the reference raises on it or spends more than `per_case_s` CPU seconds (no test then)."""
    ns: dict[str, Any] = {"__name__": "reference"}
    exec(compile(reference, f"<{function}>", "exec"), ns)  # noqa: S102 - the authors' shipped reference
    fn = ns[function]
    old = signal.signal(signal.SIGPROF, _alarm)
    out: list[Any] = []
    try:
        for args in inputs:
            signal.setitimer(signal.ITIMER_PROF, per_case_s)
            try:
                out.append([True, encode_expected(fn(*ast.literal_eval(repr(list(args)))))])
            except _Deadline:
                out.append([False, f"the reference spends more than {per_case_s:g} s of CPU on it"])
            except Exception as exc:  # noqa: BLE001 - an input the reference does not accept is no test
                out.append([False, f"the reference raises {type(exc).__name__}"])
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
        return out
    finally:
        signal.signal(signal.SIGPROF, old)
