"""Running Python test suites: strict encoding of expected values, comparison by the judge,
pytest-style files run by the judge against remote calls, per-test timeouts and crashes, budgets
and report validation."""

from __future__ import annotations

import json

import pytest

from cm_gym.evaluators.sandbox import Limits, Sandbox
from cm_gym.evaluators.testrun import Case, TestSuite, _suite_run, compare, decode, encode_expected, run_suite
from cm_gym.evaluators.worker import WorkerResult

LIMITS = Limits(wall_s=6.0, cpu_s=6.0, memory_mb=256, max_procs=16)


@pytest.fixture(scope="module")
def sb() -> Sandbox:
    return Sandbox(LIMITS)


def cases_suite(n: int = 4, timeout: float = 0.5, guard: float | None = None) -> TestSuite:
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
        hang_guard_s=guard,
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


SPIN = "import time\ndef f(a, b):\n    t = time.process_time()\n    while time.process_time() - t < {s}:\n        pass\n    return (a + b, [a])\n"
SLEEP = "import time\ndef f(a, b):\n    time.sleep({s})\n    return (a + b, [a])\n"


def test_cpu_time_not_wall_time_is_the_budget(sb: Sandbox) -> None:
    """Sleeping costs no CPU (passes a 0.5 s CPU budget), computing does (fails it): on any
    machine and under any load."""
    asleep = run_suite(sb, cases_suite(n=2, timeout=0.5), SLEEP.format(s=1.0))
    assert asleep.passed == 2 and asleep.max_test_cpu_s < 0.5
    busy = run_suite(sb, cases_suite(n=2, timeout=0.5), SPIN.format(s=5.0))
    assert [r.status for r in busy.results] == ["timeout", "timeout"] and not busy.infrastructure
    assert "CPU time" in busy.results[0].message and busy.results[0].cpu_s >= 0.5
    whole = run_suite(sb, cases_suite(n=3, timeout=0.5), SPIN.format(s=0.3), limits=Limits(cpu_s=0.5))
    assert [r.status for r in whole.results] == ["pass", "timeout", "timeout"]
    assert "CPU budget" in whole.results[-1].message


def test_a_program_that_blocks_fails_at_the_hang_guard_as_its_own_timeout(sb: Sandbox) -> None:
    run = run_suite(sb, cases_suite(n=3, timeout=0.5, guard=1.0), SLEEP.format(s=30))
    assert [r.status for r in run.results] == ["timeout"] * 3 and not run.infrastructure
    assert "blocked" in run.results[0].message and "earlier tests timed out" in run.results[2].message


def test_a_test_the_machine_starves_is_infrastructure_not_a_failure(sb: Sandbox) -> None:
    """A program still computing within its CPU budget when the wall-clock guard passes was
    starved (here: a guard far too small for its budget): the test says nothing about it."""
    run = run_suite(sb, cases_suite(n=1, timeout=60.0, guard=0.3), SPIN.format(s=5.0))
    assert [r.status for r in run.results] == ["infrastructure"] and run.infrastructure
    assert "hang guard" in run.results[0].message


def test_pytest_mode_runs_the_tests_in_the_judge(sb: Sandbox) -> None:
    test_src = (
        "import pytest\nfrom prog import g\nfrom nodes import Node\n"
        "@pytest.mark.parametrize('a,b', [(1, 2), (2, 3)])\ndef test_p(a, b):\n    assert g(a) == b\n"
        "def test_identity():\n    n = Node()\n    assert g(n) is n\n"
        "def test_truth():\n    assert not g(0)\n"
        "def test_approx():\n    assert g(0.5) == pytest.approx(1.5, abs=0.01)\n"
    )
    nodes = "class Node:\n    pass\n"
    suite = TestSuite(
        mode="pytest",
        program_path="prog.py",
        files={"test_prog.py": test_src, "nodes.py": nodes},
        sandbox_files={"nodes.py": nodes},
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
    honest = "from nodes import Node\ndef g(a):\n    return a if isinstance(a, Node) else a + 1 if a else 0\n"
    assert run_suite(sb, suite, honest).passed == 5
    liar = (
        "class Any:\n    def __eq__(self, o):\n        return True\n"
        "    def __bool__(self):\n        return False\ndef g(a):\n    return Any()\n"
    )
    run = run_suite(sb, suite, liar)
    assert run.passed == 0
    assert "cannot be checked" in run.first_failure()


def test_only_the_expected_test_list_is_accepted() -> None:
    suite = cases_suite(n=1)
    sb = Sandbox(LIMITS)
    good = {"results": [["test_0", "pass", ""]], "wall_s": 0.1, "isolation": "x", "strays": 0}
    assert _suite_run(suite, WorkerResult("ok", good), None, 0, sb).passed == 1
    extra = dict(good, results=[["test_0", "pass", ""], ["test_9", "pass", ""]])
    assert "test list" in _suite_run(suite, WorkerResult("ok", extra), None, 0, sb).error
    killed = _suite_run(suite, WorkerResult("timeout", error="deadline"), None, 0, sb)
    assert killed.passed == 0 and "hang guard" in killed.error and killed.infrastructure


def test_suite_round_trips_through_a_dict() -> None:
    suite = cases_suite()
    assert TestSuite.from_dict(json.loads(json.dumps(suite.to_dict()))) == suite
