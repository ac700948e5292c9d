"""Running Python test suites in the sandbox: strict encoding, parent-side comparison, pytest-style
files with rewritten asserts, per-test timeouts and crashes, and report validation."""

from __future__ import annotations

import json

import pytest

from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxResult
from cm_gym.evaluators.testrun import (
    Case,
    TestSuite,
    _parse_report,
    compare,
    decode,
    encode_expected,
    rewrite_asserts,
    run_suite,
)

LIMITS = Limits(wall_s=6.0, cpu_s=6.0, memory_mb=256, max_procs=16)


@pytest.fixture(scope="module")
def sb() -> Sandbox:
    return Sandbox(LIMITS)


def cases_suite(n: int = 4, timeout: float = 0.5) -> TestSuite:
    return TestSuite(
        mode="cases",
        program_path="solution.py",
        module="solution",
        function="f",
        cases=tuple(
            Case(f"test_{i}", "f(*input_data)", [i, 2], encode_expected((i + 2, [i]))) for i in range(n)
        ),
        per_test_timeout=timeout,
        max_timeouts=2,
    )


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        10**30,
        -0.0,
        float("inf"),
        "s",
        b"\x00b",
        [1, (2, 3)],
        {"a": {1, 2}},
        frozenset({1}),
        (),
        2 + 3j,
    ],
)
def test_encode_decode_round_trip_keeps_types(value: object) -> None:
    back = decode(json.loads(json.dumps(encode_expected(value))))
    assert back == value and type(back) is type(value)


def test_encode_refuses_objects_with_their_own_equality() -> None:
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    with pytest.raises(Exception, match="not a plain value"):
        encode_expected(Liar(1))


def test_compare_distinguishes_tuple_from_list_and_supports_approx() -> None:
    case = Case("t", "f(*input_data)", [1], encode_expected([(1, 3)]))
    assert compare(case, [(1, 3)], "f")[0]
    ok, msg = compare(case, [[1, 3]], "f")
    assert not ok and "assert f(1) == [(1, 3)], got [[1, 3]]" in msg
    approx = Case("t", "f(*input_data)", [2, 0.01], {"approx": 1.4142, "abs": 0.01, "rel": None})
    assert (
        compare(approx, 1.41, "f")[0]
        and not compare(approx, 1.5, "f")[0]
        and not compare(approx, "1.41", "f")[0]
    )


def test_rewrite_asserts_keeps_lines_and_wraps_comparisons() -> None:
    src = "def test_x():\n    assert f(1,\n        2) == [1]\n    assert not g()\n    assert h(), 'msg'\n"
    out = rewrite_asserts(src)
    assert out.count("\n") == src.count("\n")
    assert "__cm_eq__((f(1,\n        2)), ([1]))" in out
    assert "not __cm_truth__((g()))" in out and "__cm_truth__((h())), 'msg'" in out
    compile(out, "t", "exec")


def test_cases_pass_fail_and_feedback(sb: Sandbox) -> None:
    good = run_suite(sb, cases_suite(), "def f(a, b):\n    return (a + b, [a])\n")
    assert (good.passed, good.total, good.first_failure()) == (4, 4, "")
    bad = run_suite(sb, cases_suite(), "def f(a, b):\n    return (a + b, (a,))\n")
    assert bad.passed == 0
    assert bad.first_failure().startswith("FAILED test_0: assert f(0, 2) == (2, [0]), got (2, (0,))")


def test_per_test_timeout_and_crash_only_fail_their_own_test(sb: Sandbox) -> None:
    program = (
        "import os\ndef f(a, b):\n    if a == 1:\n        while True:\n            pass\n"
        "    if a == 2:\n        os._exit(3)\n    return (a + b, [a])\n"
    )
    run = run_suite(sb, cases_suite(), program)
    statuses = [r.status for r in run.results]
    assert statuses == ["pass", "timeout", "crash", "pass"]
    assert run.fraction == 0.5


def test_repeated_timeouts_stop_the_run_early(sb: Sandbox) -> None:
    run = run_suite(sb, cases_suite(n=6), "def f(a, b):\n    while True:\n        pass\n")
    assert [r.status for r in run.results] == ["timeout"] * 6
    assert "earlier tests timed out" in run.results[-1].message


def test_whole_run_budget_is_enforced(sb: Sandbox) -> None:
    run = run_suite(sb, cases_suite(n=3, timeout=5.0), "import time\ndef f(a, b):\n    time.sleep(30)\n",
                    limits=Limits(wall_s=1.0))  # fmt: skip
    assert run.passed == 0 and run.sandbox is not None and run.sandbox.wall_s < 6


def test_pytest_mode_with_strict_assertions(sb: Sandbox) -> None:
    test_src = (
        "import pytest\nfrom prog import g, Node\n"
        "@pytest.mark.parametrize('a,b', [(1, 2), (2, 3)])\ndef test_p(a, b):\n    assert g(a) == b\n"
        "def test_identity():\n    n = Node()\n    assert g(n) == n\n"
        "def test_truth():\n    assert not g(0)\n"
        "def test_approx():\n    assert g(0.5) == pytest.approx(1.5, abs=0.01)\n"
    )
    suite = TestSuite(
        mode="pytest",
        program_path="prog.py",
        files={"test_prog.py": rewrite_asserts(test_src)},
        test_file="test_prog.py",
        tests=(
            ("test_p[0]", "test_p", 0),
            ("test_p[1]", "test_p", 1),
            ("test_identity", "test_identity", None),
            ("test_truth", "test_truth", None),
            ("test_approx", "test_approx", None),
        ),  # fmt: skip
        per_test_timeout=1.0,
    )
    honest = "class Node:\n    pass\ndef g(a):\n    return a if isinstance(a, Node) else a + 1 if a else 0\n"
    assert run_suite(sb, suite, honest).passed == 5
    liar = (
        "class Node:\n    pass\nclass Any:\n    def __eq__(self, o):\n        return True\n"
        "    def __bool__(self):\n        return False\ndef g(a):\n    return Any()\n"
    )
    run = run_suite(sb, suite, liar)
    assert run.passed == 0
    assert "untrusted" in run.first_failure() and "__cm_eq__" not in run.first_failure()


def _fake(report: bytes) -> SandboxResult:
    return SandboxResult(0, "", "", report, False, "", 0, 0.1, "test")


def test_report_with_wrong_nonce_or_test_list_is_rejected() -> None:
    suite = cases_suite(n=1)
    good = (
        b"n0nce\n"
        + json.dumps([{"name": "test_0", "status": "value", "value": encode_expected((2, [0]))}]).encode()
    )
    assert _parse_report(suite, _fake(good), "n0nce", ["test_0"]).passed == 1
    assert "nonce" in _parse_report(suite, _fake(good), "other", ["test_0"]).error
    assert "test list" in _parse_report(suite, _fake(good), "n0nce", ["test_0", "test_1"]).error
    assert "malformed" in _parse_report(suite, _fake(b"n0nce\n{not json"), "n0nce", ["test_0"]).error
    assert "no report" in _parse_report(suite, _fake(b""), "n0nce", ["test_0"]).error


def test_a_pass_status_is_not_accepted_in_cases_mode() -> None:
    suite = cases_suite(n=1)
    forged = b"n\n" + json.dumps([{"name": "test_0", "status": "pass"}]).encode()
    assert _parse_report(suite, _fake(forged), "n", ["test_0"]).passed == 0


def test_suite_round_trips_through_a_dict() -> None:
    suite = cases_suite()
    assert TestSuite.from_dict(json.loads(json.dumps(suite.to_dict()))) == suite
