"""Run a Python test suite against a candidate program: the verdicts are decided by the judge.

A `TestSuite` is plain, JSON-serialisable data (it lives in ``Task.meta``): where the program
goes, the support files, and either *cases* (an expression per test, evaluated on the program in
the sandbox; the expected values stay outside it and are compared outside it) or *pytest-style*
test functions of a test file (imported and run by the judge; the program's functions are
remote calls). `run_suite` hands the suite and the program to the judge worker (`judge.py`, a
trusted process of its own, killed and restarted if it passes its deadline), which stages the
program in the sandbox (`program.py`), runs the tests and returns per-test verdicts; this side
then kills whatever the run left behind (by its fresh uid) and deletes its files. Files needed
only by the tests (`files`: the test file, expected data) never enter the sandbox; `sandbox_files`
(modules the program may import) do.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import reprlib
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cm_gym.evaluators._probe import fresh_uid
from cm_gym.evaluators.isolation import kill_uid
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxResult
from cm_gym.evaluators.worker import Worker

logger = logging.getLogger(__name__)

FEEDBACK_LIMIT = 800
#: the judge's own time on top of the suite's hang guard (process starts, decoding, its deadline)
JUDGE_SLACK_S = 10.0
#: a test's wall-clock hang guard: this many times its CPU budget, and at least `HANG_MIN_S`
HANG_FACTOR = 10.0
HANG_MIN_S = 30.0
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
    *_DICTS,
)
MAX_NODES = 200_000


class Unencodable(Exception):
    """An expected value that is not plain data (or too large)."""


def encode(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """Strict, tagged JSON form of a plain value (tuples, sets, dicts keep their type)."""
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > 200:
        raise Unencodable("value too large or too deep")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        if value.bit_length() > 14_000:
            raise Unencodable("integer too large")
        return value
    if t is float:
        return {"float": repr(value)}
    if t is list or t is collections.deque:
        return [encode(v, depth + 1, budget) for v in value]
    if t is tuple:
        return {"tuple": [encode(v, depth + 1, budget) for v in value]}
    if t in _DICTS:
        return {
            "dict": [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)] for k, v in value.items()]
        }
    if t is set or t is frozenset:
        return {t.__name__: [encode(v, depth + 1, budget) for v in value]}
    if t is bytes:
        return {"bytes": value.hex()}
    if t is complex:
        return {"complex": [value.real, value.imag]}
    raise Unencodable("not a plain value: " + t.__name__)


def is_plain(value: Any, depth: int = 0) -> bool:
    t = type(value)
    if t not in _PLAIN or depth > 200:
        return False
    if t in (list, tuple, set, frozenset, collections.deque):
        return all(is_plain(v, depth + 1) for v in value)
    if t in _DICTS:
        return all(is_plain(k, depth + 1) and is_plain(v, depth + 1) for k, v in value.items())
    return True


def decode(value: Any) -> Any:
    """Inverse of the runner's strict `encode` (tagged JSON → Python value)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        ((tag, inner),) = value.items()
        if tag == "float":
            return float(inner)
        if tag == "tuple":
            return tuple(decode(v) for v in inner)
        if tag == "dict":
            return {decode(k): decode(v) for k, v in inner}
        if tag == "set":
            return {decode(v) for v in inner}
        if tag == "frozenset":
            return frozenset(decode(v) for v in inner)
        if tag == "bytes":
            return bytes.fromhex(inner)
        if tag == "complex":
            return complex(inner[0], inner[1])
        raise ValueError(f"unknown tag {tag!r}")
    return value


@dataclass(frozen=True)
class Case:
    """One expression-style test: `expr` (e.g. ``f(*input_data)``) evaluated on `input` in the
    sandbox; `expected` is the tagged expected value, or ``{"approx": x, "abs": a, "rel": r}``."""

    name: str
    expr: str
    input: Any
    expected: Any


@dataclass(frozen=True)
class TestSuite:
    """The tests of one task (see module doc). `files`: support files of the tests (path →
    text; the judge's side only); `sandbox_files`: modules staged next to the program."""

    __test__ = False  # not a pytest test class

    mode: str
    program_path: str
    files: Mapping[str, str] = field(default_factory=dict)
    sandbox_files: Mapping[str, str] = field(default_factory=dict)
    module: str = ""
    function: str = ""
    cases: tuple[Case, ...] = ()
    test_file: str = ""
    tests: tuple[tuple[str, str, int | None], ...] = ()
    sys_path: tuple[str, ...] = (".",)
    per_test_timeout: float = 2.0  # the CPU budget of one test, seconds
    max_timeouts: int = 2
    hang_guard_s: float | None = None  # a test's wall-clock hang guard (None: `HANG_FACTOR` rule)

    def names(self) -> list[str]:
        return [c.name for c in self.cases] if self.mode == "cases" else [t[0] for t in self.tests]

    def test_hang_guard_s(self) -> float:
        """One test's wall-clock hang guard (seconds): far above what its CPU budget takes."""
        if self.hang_guard_s is not None:
            return float(self.hang_guard_s)
        return max(HANG_FACTOR * float(self.per_test_timeout), HANG_MIN_S)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["files"] = dict(self.files)
        d["sandbox_files"] = dict(self.sandbox_files)
        d["cases"] = [c.__dict__ for c in self.cases]
        d["tests"] = [list(t) for t in self.tests]
        d["sys_path"] = list(self.sys_path)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestSuite:
        return cls(
            mode=d["mode"],
            program_path=d["program_path"],
            files=dict(d.get("files", {})),
            sandbox_files=dict(d.get("sandbox_files", {})),
            module=d.get("module", ""),
            function=d.get("function", ""),
            cases=tuple(Case(**c) for c in d.get("cases", ())),
            test_file=d.get("test_file", ""),
            tests=tuple((t[0], t[1], t[2]) for t in d.get("tests", ())),
            sys_path=tuple(d.get("sys_path", (".",))),
            per_test_timeout=float(d.get("per_test_timeout", 2.0)),
            max_timeouts=int(d.get("max_timeouts", 2)),
            hang_guard_s=float(d["hang_guard_s"]) if d.get("hang_guard_s") is not None else None,
        )


@dataclass(frozen=True)
class TestResult:
    """One test's verdict."""

    __test__ = False

    name: str
    passed: bool
    status: str
    message: str = ""
    cpu_s: float = 0.0  # the program's CPU seconds in this test (its budget: per_test_timeout)


@dataclass(frozen=True)
class SuiteRun:
    """Per-test results; `error` is set when the run as a whole failed (no valid report)."""

    results: tuple[TestResult, ...]
    total: int
    error: str = ""
    sandbox: SandboxResult | None = None

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def infrastructure(self) -> bool:
        """Whether a hang guard stopped the run or one of its tests (the verdict says nothing)."""
        return self.error.startswith("infrastructure") or any(
            r.status == "infrastructure" for r in self.results
        )

    @property
    def max_test_cpu_s(self) -> float:
        """The most CPU time one test used (what its budget must cover)."""
        return max((r.cpu_s for r in self.results), default=0.0)

    def first_failure(self) -> str:
        """The first failing test's name and assertion, truncated (the Outcome feedback)."""
        if self.error:
            return _cut(self.error)
        for r in self.results:
            if not r.passed:
                return _cut(f"FAILED {r.name}: {r.message}")
        return ""


def suite_hang_guard_s(suite: TestSuite, limits: Limits) -> float:
    """The whole suite's wall-clock hang guard: `limits.wall_s`, raised so that it passes only
    after the suite's CPU budget times `HANG_FACTOR` and the per-test guards of the tests that may
    block before the run stops (`max_timeouts`) would have."""
    blocked = (suite.max_timeouts + 1) * suite.test_hang_guard_s()
    return max(float(limits.wall_s), HANG_FACTOR * float(limits.cpu_s), blocked)


def _cut(text: str, limit: int = FEEDBACK_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 4, 160, 160, 160


def _short(value: Any, limit: int = 200) -> str:
    """A bounded repr (depth and size capped: the value may come from the program)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_text(case: Case, function: str) -> str:
    if case.expr == f"{function}(*input_data)" and isinstance(case.input, list):
        return f"{function}({', '.join(_short(a, 80) for a in case.input)})"
    return f"{case.expr} with input_data={_short(case.input)}"


def compare(case: Case, got: Any, function: str) -> tuple[bool, str]:
    """The judge's check of one case's value; returns (passed, failure message)."""
    exp = case.expected
    call = _call_text(case, function)
    if isinstance(exp, dict) and "approx" in exp:
        target = float(exp["approx"])
        tol = float(exp["abs"]) if exp.get("abs") is not None else max(1e-6 * abs(target), 1e-12)
        ok = type(got) in (int, float) and math.isfinite(float(got)) and abs(got - target) <= tol
        return ok, f"assert {call} == approx({target!r}, abs={tol!r}), got {_short(got)}"
    expected = decode(exp)
    ok = type(got) is type(expected) and got == expected or _numeric_equal(got, expected)
    return bool(ok), f"assert {call} == {_short(expected)}, got {_short(got)}"


def _numeric_equal(a: Any, b: Any) -> bool:
    # Python's own == between plain numbers (1 == 1.0, True == 1), as upstream asserts behave
    return is_plain(a) and is_plain(b) and not isinstance(a, str) and a == b


def encode_expected(value: Any) -> Any:
    """Tagged form of an expected value (how suites store them in ``Task.meta``)."""
    return encode(value)


_JUDGE: Worker | None = None


def default_judge() -> Worker:
    """This process's shared judge worker (started on first use)."""
    global _JUDGE
    if _JUDGE is None:
        _JUDGE = new_judge()
    return _JUDGE


def new_judge() -> Worker:
    """A judge worker (`judge.py`): trusted, memory-capped, killable."""
    return Worker("cm_gym.evaluators.judge", memory_mb=1024)


def run_suite(
    sandbox: Sandbox,
    suite: TestSuite,
    program: str,
    *,
    limits: Limits | None = None,
    judge: Worker | None = None,
) -> SuiteRun:
    """Judge `program` (source text) against `suite` (see module doc). Never raises for what the
    program does. Each test may spend ``suite.per_test_timeout`` and the suite ``limits.cpu_s``
    seconds of the program's CPU time; the whole run's wall clock is only a hang guard
    (`suite_hang_guard_s` plus `JUDGE_SLACK_S`): a run it stops is an "infrastructure" error."""
    lim = limits or sandbox.limits
    plan_uid = sandbox._ensure().uid
    uid = fresh_uid() if plan_uid is not None else None
    parent_dir = tempfile.mkdtemp(prefix="cm_gym_check_")
    os.chmod(parent_dir, 0o711)
    request = {"suite": suite.to_dict(), "program": program, "limits": dict(lim.__dict__), "uid": uid,
               "isolation": sandbox.mode, "extra_paths": list(sandbox.extra_paths), "parent_dir": parent_dir}  # fmt: skip
    strays = 0
    try:
        guard = suite_hang_guard_s(suite, lim) + JUDGE_SLACK_S
        res = (judge or default_judge()).call("judge_suite", request, timeout=guard)
    finally:
        if uid is not None:
            strays = kill_uid(uid)
        shutil.rmtree(parent_dir, ignore_errors=True)
    return _suite_run(suite, res, uid, strays, sandbox)


def _seconds(rest: Any) -> float:
    try:
        return round(float(rest[0]), 3) if rest else 0.0
    except (TypeError, ValueError):
        return 0.0


def _suite_run(suite: TestSuite, res: Any, uid: int | None, strays: int, sandbox: Sandbox) -> SuiteRun:
    names = suite.names()
    if not res.ok:
        why = (
            "infrastructure: the test run passed its wall-clock hang guard (its judge was killed)"
            if res.status == "timeout"
            else res.error
        )
        summary = SandboxResult(None, "", res.error, b"", res.status == "timeout", res.status, 0, res.wall_s,
                                sandbox.isolation, strays, False, uid)  # fmt: skip
        return SuiteRun((), len(names), why, summary)
    out = res.value
    raw = out.get("results", []) if isinstance(out, dict) else []
    if [r[0] for r in raw] != names or any(len(r) not in (3, 4) for r in raw):
        return SuiteRun((), len(names), "test report rejected: unexpected test list", None)
    results = tuple(
        TestResult(r[0], r[1] == "pass", r[1], "" if r[1] == "pass" else _cut(str(r[2])), _seconds(r[3:]))
        for r in raw
    )
    timed_out = any(r.status == "timeout" for r in results)
    summary = SandboxResult(0, "", "", b"", timed_out, "", 0, float(out["wall_s"]), str(out["isolation"]),
                            strays + int(out.get("strays", 0)), False, uid, float(out.get("peak_rss_mb", 0.0)))  # fmt: skip
    return SuiteRun(results, len(names), "", summary)
