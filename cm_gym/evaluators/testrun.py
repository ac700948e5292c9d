"""Run a Python test suite against a candidate program inside the sandbox (parent side).

A `TestSuite` is plain, JSON-serialisable data (it lives in ``Task.meta``): where the program
goes, the support files, and either *cases* (an expression per test, evaluated in the sandbox;
the expected values stay here and are compared here) or *pytest-style* test functions of a test
file (verdicts decided in the sandbox, with assertions rewritten by `rewrite_asserts`). The
in-sandbox side is `_runner.py`; `run_suite` wires the two through `Sandbox.run`'s report pipe,
checks the report's nonce and test list, and returns per-test results.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.evaluators._runner import encode, is_plain
from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxResult

logger = logging.getLogger(__name__)

_HERE = Path(__file__).parent
RUNNER_SOURCE = (_HERE / "_runner.py").read_text(encoding="utf-8")
SHIM_SOURCE = (_HERE / "_pytest_shim.py").read_text(encoding="utf-8")
FEEDBACK_LIMIT = 800


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
    """The tests of one task (see module doc). `files` are support files (path → text)."""

    __test__ = False  # not a pytest test class

    mode: str
    program_path: str
    files: Mapping[str, str] = field(default_factory=dict)
    module: str = ""
    function: str = ""
    cases: tuple[Case, ...] = ()
    test_file: str = ""
    tests: tuple[tuple[str, str, int | None], ...] = ()
    sys_path: tuple[str, ...] = (".",)
    per_test_timeout: float = 2.0
    max_timeouts: int = 2

    def names(self) -> list[str]:
        return [c.name for c in self.cases] if self.mode == "cases" else [t[0] for t in self.tests]

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["files"] = dict(self.files)
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
            module=d.get("module", ""),
            function=d.get("function", ""),
            cases=tuple(Case(**c) for c in d.get("cases", ())),
            test_file=d.get("test_file", ""),
            tests=tuple((t[0], t[1], t[2]) for t in d.get("tests", ())),
            sys_path=tuple(d.get("sys_path", (".",))),
            per_test_timeout=float(d.get("per_test_timeout", 2.0)),
            max_timeouts=int(d.get("max_timeouts", 2)),
        )


@dataclass(frozen=True)
class TestResult:
    """One test's verdict."""

    __test__ = False

    name: str
    passed: bool
    status: str
    message: str = ""


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

    def first_failure(self) -> str:
        """The first failing test's name and assertion, truncated (the Outcome feedback)."""
        if self.error:
            return _cut(self.error)
        for r in self.results:
            if not r.passed:
                return _cut(f"FAILED {r.name}: {r.message}")
        return ""


def _cut(text: str, limit: int = FEEDBACK_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_text(case: Case, function: str) -> str:
    if case.expr == f"{function}(*input_data)" and isinstance(case.input, list):
        return f"{function}({', '.join(_short(a, 80) for a in case.input)})"
    return f"{case.expr} with input_data={_short(case.input)}"


def compare(case: Case, got: Any, function: str) -> tuple[bool, str]:
    """Parent-side check of one case's value; returns (passed, failure message)."""
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
    """Tagged form of an expected value (same encoding the sandbox uses for results)."""
    return encode(value)


def _offsets(source: str) -> list[int]:
    starts, pos = [0], 0
    for line in source.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def rewrite_asserts(source: str) -> str:
    """Rewrite ``assert a == b`` / ``assert not x`` / ``assert x`` to the runner's strict
    `__cm_eq__` / `__cm_truth__` checks, in place (layout and line numbers are kept)."""
    tree = ast.parse(source)
    starts = _offsets(source)

    def span(node: ast.expr) -> tuple[int, int]:
        end_line = node.end_lineno or node.lineno
        end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        return starts[node.lineno - 1] + node.col_offset, starts[end_line - 1] + end_col

    def seg(node: ast.expr) -> str:
        a, b = span(node)
        return "(" + source[a:b] + ")"

    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            text = f"__cm_eq__({seg(test.left)}, {seg(test.comparators[0])})"
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            text = f"not __cm_truth__({seg(test.operand)})"
        else:
            text = f"__cm_truth__({seg(test)})"
        a, b = span(test)
        edits.append((a, b, text))
    for a, b, text in sorted(edits, reverse=True):
        source = source[:a] + text + source[b:]
    return source


def run_suite(sandbox: Sandbox, suite: TestSuite, program: str, *, limits: Limits | None = None) -> SuiteRun:
    """Run `suite` against `program` (source text) in a throw-away sandbox copy."""
    names = suite.names()
    nonce = secrets.token_hex(16)
    config: dict[str, Any] = {
        "mode": suite.mode,
        "sys_path": list(suite.sys_path),
        "per_test_timeout": suite.per_test_timeout,
        "max_timeouts": suite.max_timeouts,
    }
    if suite.mode == "cases":
        config.update(
            module=suite.module,
            function=suite.function,
            tests=[{"name": c.name, "expr": c.expr, "input": c.input} for c in suite.cases],
        )
    else:
        config.update(
            test_file=suite.test_file,
            tests=[{"name": n, "func": f, "index": i} for n, f, i in suite.tests],
        )
    files: dict[str, str] = {"_cm_runner.py": RUNNER_SOURCE, "pytest.py": SHIM_SOURCE}
    files.update(suite.files)
    files[suite.program_path] = program
    base = limits or sandbox.limits
    config["budget_s"] = base.wall_s
    files["_cm_config.json"] = json.dumps(config)
    run_limits = Limits(
        **{**base.__dict__, "wall_s": base.wall_s + 3.0, "cpu_s": max(base.cpu_s, suite.per_test_timeout + 1)}
    )
    res = sandbox.run(
        [sandbox.python, "-I", "-S", "_cm_runner.py", "{report_fd}"],
        files,
        limits=run_limits,
        stdin=(nonce + "\n").encode(),
        report=True,
    )
    return _parse_report(suite, res, nonce, names)


_EQ = re.compile(r"__cm_eq__\(\((.*)\), \((.*)\)\)")
_TRUTH = re.compile(r"__cm_truth__\(\((.*)\)\)")


def _readable(message: str) -> str:
    """Undo the assertion rewrite in feedback (``__cm_eq__((a), (b))`` → ``a == b``)."""
    return _TRUTH.sub(r"\1", _EQ.sub(r"\1 == \2", message))


def _parse_report(suite: TestSuite, res: SandboxResult, nonce: str, names: Sequence[str]) -> SuiteRun:
    total = len(names)
    head, _, body = res.report.decode("utf-8", "replace").partition("\n")
    if not res.report:
        tail = res.stderr.strip().splitlines()[-3:]
        why = f"test run produced no report ({res.describe_exit()})"
        return SuiteRun((), total, why + (": " + " | ".join(tail) if tail else ""), res)
    if head != nonce:
        return SuiteRun((), total, "test report rejected: bad nonce (tampered report channel)", res)
    try:
        raw = json.loads(body)
        got_names = [r["name"] for r in raw]
    except (ValueError, KeyError, TypeError):
        return SuiteRun((), total, "test report rejected: malformed", res)
    if got_names != list(names):
        return SuiteRun((), total, "test report rejected: unexpected test list", res)
    cases = {c.name: c for c in suite.cases}
    results = []
    for r in raw:
        status, msg = str(r.get("status", "")), str(r.get("message", ""))
        if status == "value" and r["name"] in cases:
            try:
                got = decode(r.get("value"))
                ok, msg = compare(cases[r["name"]], got, suite.function)
            except (ValueError, TypeError, KeyError) as exc:
                ok, msg = False, f"undecodable result: {exc}"
            results.append(TestResult(r["name"], ok, "pass" if ok else "fail", "" if ok else msg))
        elif status == "pass" and suite.mode == "pytest":
            results.append(TestResult(r["name"], True, "pass"))
        else:
            results.append(TestResult(r["name"], False, status or "error", _readable(msg)))
    return SuiteRun(tuple(results), total, "", res)
