"""Issue 14's probe classes for the code world model (our own writing), next to `hostile.py`'s
containment corpus: patches that try to *forge a verdict* or *crash the evaluator*, not just to
escape. Every one is checked like the corpus (`hostile_check.check_patch`): the check must not be
solved, must give a reason, must not raise, and must stay within its memory cap.

Classes: verdicts forged from inside the program's process (walking the interpreter's frames to
the result pipe and its token; overwriting the comparison helpers the test module uses), answers
read from disk (the data folder, the package's generated references, another task's copy, the
cache), crashing the parent (a forged deeply nested value; a 5 KB tower of unary operators in the
action itself), and memory multiplied by forks. Placeholders (``$data_file``, ``$package_file``,
``$other_task_file``, ``$cache_file``) name files the *checker* points at; a patch "solves" the task
only when the thing it tries works (a visible file, a forged report, every fork's allocation), so
a solved check is the violation. `mode` says which task a patch runs on: the cases-mode ``add``
task of `hostile.hostile_task`, or its pytest-mode twin `hostile_pytest_task`.
"""

from __future__ import annotations

from cm_gym.core.types import Task
from cm_gym.domains.code.hostile import HostilePatch
from cm_gym.evaluators.testrun import TestSuite

_WALK = """import os, sys
def _forge(report):
    f = sys._getframe()
    while f is not None:
        loc = f.f_locals
        if 'token' in loc and 'wfd' in loc and 'tests' in loc:
            for i, _ in enumerate(loc['tests']):
                os.write(loc['wfd'], (loc['token'] + ' ' + str(i) + ' ' + report + '\\n').encode())
            os._exit(0)
        f = f.f_back
"""


def _visible(name: str, what: str, placeholder: str) -> HostilePatch:
    body = f"import os\ndef add(a, b):\n    return a + b if os.path.exists('${placeholder}') else a - b\n"
    return HostilePatch(name, what, body, ("fs",))


FORGERY: tuple[HostilePatch, ...] = (
    HostilePatch(
        "frame_walk_forges_pass",
        "walks the interpreter's frames to the result pipe and its token, writes 'pass' for every test",
        _WALK + 'def add(a, b):\n    _forge(\'{"status": "pass"}\')\n    return 0\n',
        mode="pytest",
    ),
    HostilePatch(
        "overwrite_comparison_helpers",
        "replaces the strict comparison helpers of the test module that imports it",
        "import sys\nfor _m in list(sys.modules.values()):\n    if hasattr(_m, '__cm_eq__'):\n"
        "        _m.__cm_eq__ = lambda a, b: True\n        _m.__cm_truth__ = lambda x: True\n"
        "def add(a, b):\n    return 0\n",
        mode="pytest",
    ),
    HostilePatch(
        "overwrite_builtins_used_by_the_runner",
        "patches builtins the result encoding and comparison rely on",
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.type = lambda *a: int\n"
        "def add(a, b):\n    return 0\n",
        mode="pytest",
    ),
    HostilePatch(
        "forged_deeply_nested_value_crashes_the_parent",
        "forges a result report holding a value nested 600 levels deep",
        _WALK
        + "def add(a, b):\n    _forge('{\"status\": \"value\", \"value\": ' + '[' * 600 + ']' * 600 + '}')\n"
        "    return 0\n",
    ),
    HostilePatch(
        "deeply_nested_return_value",
        "returns a list nested 100,000 levels deep",
        "def add(a, b):\n    x = []\n    for _ in range(100000):\n        x = [x]\n    return x\n",
    ),
    HostilePatch(
        "unary_operator_tower_in_the_action",
        "a 5 KB action: one expression of 5,000 nested unary operators",
        "def add(a, b):\n    return " + "-" * 5000 + "a\n",
    ),
    _visible("reads_the_data_folder", "reads a file of the real data folder", "data_file"),
    _visible(
        "reads_the_package_references", "reads the package's generated reference programs", "package_file"
    ),
    _visible("reads_another_tasks_copy", "reads a file in another run's sandbox copy", "other_task_file"),
    _visible("reads_the_cache", "reads a file of the cache folder", "cache_file"),
    HostilePatch(
        "memory_multiplied_by_forks",
        "forks 6 children that each fill 150 MB (under the per-process limit, 900 MB together)",
        "import os, time\n_OK = []\ndef add(a, b):\n    if not _OK:\n        r, w = os.pipe()\n"
        "        for _ in range(6):\n            if os.fork() == 0:\n                try:\n"
        "                    x = b'x' * (150 << 20)\n                    os.write(w, b'1')\n"
        "                finally:\n                    time.sleep(4)\n                    os._exit(0)\n"
        "        got = b''\n        while len(got) < 6:\n            got += os.read(r, 6)\n"
        "        _OK.append(True)\n    return a + b\n",
        ("uid",),
        timeout=3.5,
    ),
)

_TEST_FILE = (
    "from solution import add\n\n"
    "def test_small():\n    assert add(1, 2) == 3\n\n"
    "def test_large():\n    assert add(5, 7) == 12\n\n"
    "def test_negative():\n    assert add(-1, 1) == 0\n"
)


def hostile_pytest_task(base: Task, per_test_timeout: float = 0.5) -> Task:
    """`base` (the ``add`` task) with its tests as a pytest-style test file."""
    suite = TestSuite(
        mode="pytest",
        program_path="solution.py",
        module="solution",
        files={"test_hostile.py": _TEST_FILE},
        test_file="test_hostile.py",
        tests=(
            ("test_small", "test_small", None),
            ("test_large", "test_large", None),
            ("test_negative", "test_negative", None),
        ),  # fmt: skip
        per_test_timeout=per_test_timeout,
        max_timeouts=1,
        hang_guard_s=10 * per_test_timeout,  # a patch that sleeps is stopped (as its own timeout) soon
    )
    return Task(base.task_id + "-pytest", base.domain, base.prompt, base.env_id, base.reference,
                base.context, base.family, base.features, {**base.meta, "suite": suite.to_dict()})  # fmt: skip
