"""QuixBugs (Python half) loader: `data_root()/"quixbugs"` in upstream's layout.

Per program ``NAME``: ``python_programs/NAME.py`` (buggy, description in a trailing docstring),
``correct_python_programs/NAME.py`` (the reference), ``python_testcases/test_NAME.py`` (pytest)
and, for most, ``json_testcases/NAME.json``. Two ways to run the tests, chosen per file:

- *cases*: the common shape — one test parametrised over the JSON data with a body of optional
  ``if ...: pytest.skip()`` guards and a single ``assert EXPR == EXPECTED`` — is read here, in
  process (upstream's trusted test code, with the program import removed and our pytest stand-in):
  the parameters, the skip guards and the expected side are evaluated here, only ``EXPR`` runs in
  the sandbox, and the comparison happens back here (so a patch never sees expected values).
- *pytest*: anything else (the graph programs' hand-written tests) runs upstream's test file,
  unchanged, in the judge (a trusted process), with the program's functions called in the
  sandbox; the graph nodes the tests build travel by value with identity kept (see
  `cm_gym.evaluators.wire`). The test file and the JSON data never enter the sandbox.

A program whose files are missing, unreadable or malformed (a test file that does not parse, JSON
test data that does not load) is refused with the reason and the others load: recorded in a
`LoadReport` when one is passed, else one `QuixBugsLayoutError` lists them all.

Budget (issue 25): `PER_TEST_TIMEOUT` is seconds of the program's CPU time per test (not wall
time); the reference fixes use at most a few seconds of it (`bench/bench_budgets.py`).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import data_root
from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import LoadReport, refused_message
from cm_gym.domains.code.bugclass import bug_class_of, strip_docstrings
from cm_gym.domains.code.program import boundary_of, program_features
from cm_gym.evaluators import _pytest_shim
from cm_gym.evaluators.testrun import Case, TestSuite, encode_expected

PER_TEST_TIMEOUT = 10.0


class QuixBugsLayoutError(CmGymError):
    """The QuixBugs folder is missing or not in upstream's layout."""


def _description(buggy: str) -> str:
    tree = ast.parse(buggy)
    docs = [
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
    ]
    return " ".join(" ".join(d.split()) for d in docs)


def _module_namespace(tree: ast.Module, name: str, json_dir: Path) -> dict[str, Any]:
    """Execute the test module's top level without its imports (trusted upstream code)."""

    def load_json_testcases(algorithm: str) -> list[Any]:
        with open(json_dir / f"{algorithm}.json", encoding="utf-8") as f:
            return [boundedjson.loads(line, what=f.name) for line in f if line.strip()]

    def stub(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the program is not run while reading tests")

    stub.__name__ = name
    ns: dict[str, Any] = {"pytest": _pytest_shim, "load_json_testcases": load_json_testcases, name: stub}
    body = [
        n
        for n in tree.body
        if not isinstance(n, (ast.Import, ast.ImportFrom))
        and not (isinstance(n, ast.If) and "use_correct" in ast.unparse(n.test))
    ]
    exec(compile(ast.Module(body=body, type_ignores=[]), f"<test_{name}>", "exec"), ns)  # noqa: S102
    return ns


def _case_suite(name: str, test_src: str, json_dir: Path) -> TestSuite | None:
    """The *cases* form of a test file, or None when it does not have the common shape."""
    tree = ast.parse(test_src)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(funcs) != 1 or not funcs[0].decorator_list:
        return None
    fn = funcs[0]
    *guards, last = fn.body
    if not (isinstance(last, ast.Assert) and isinstance(last.test, ast.Compare)):
        return None
    cmp = last.test
    if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
        return None
    if not all(isinstance(g, ast.If) and not g.orelse and "skip" in ast.unparse(g.body) for g in guards):
        return None
    ns = _module_namespace(tree, name, json_dir)
    params = getattr(ns.get(fn.name), "_cm_params", None)
    if not params or params[0] != ["input_data", "expected"]:
        return None
    expr = ast.unparse(cmp.left)
    right = compile(ast.Expression(cmp.comparators[0]), "<expected>", "eval")
    guard_tests = [compile(ast.Expression(g.test), "<guard>", "eval") for g in guards]  # type: ignore[attr-defined]
    cases = []
    for i, (input_data, expected) in enumerate(params[1]):
        local = dict(ns, input_data=input_data, expected=expected)
        if any(eval(g, local) for g in guard_tests):  # noqa: S307 - upstream's own guard
            continue  # upstream skips it (too slow)
        value = eval(right, local)  # noqa: S307
        if isinstance(value, _pytest_shim.Approx):
            exp: Any = {"approx": value.expected, "abs": value.abs, "rel": value.rel}
        else:
            exp = encode_expected(value)
        cases.append(Case(f"{fn.name}[{i}]", expr, input_data, exp))
    return TestSuite(
        mode="cases",
        program_path=f"python_programs/{name}.py",
        module=f"python_programs.{name}",
        function=name,
        cases=tuple(cases),
        per_test_timeout=PER_TEST_TIMEOUT,
    )


def _pytest_suite(name: str, root: Path, test_src: str) -> TestSuite:
    tree = ast.parse(test_src)
    json_dir = root / "json_testcases"
    ns = _module_namespace(tree, name, json_dir) if (json_dir / f"{name}.json").exists() else {}
    tests: list[tuple[str, str, int | None]] = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")):
        params = getattr(ns.get(fn.name), "_cm_params", None)
        if params:
            tests.extend((f"{fn.name}[{i}]", fn.name, i) for i in range(len(params[1])))
        else:
            tests.append((fn.name, fn.name, None))
    node_t = (root / "python_testcases" / "node.py").read_text(encoding="utf-8")
    node_p = (root / "python_programs" / "node.py").read_text(encoding="utf-8")
    files = {  # the judge's side: the test file as upstream wrote it, and its data
        f"python_testcases/test_{name}.py": test_src,
        "python_testcases/node.py": node_t,
        "python_testcases/load_testdata.py": (root / "python_testcases" / "load_testdata.py").read_text(
            encoding="utf-8"
        ),
        "python_programs/node.py": node_p,
    }
    if (json_dir / f"{name}.json").exists():
        files[f"json_testcases/{name}.json"] = (json_dir / f"{name}.json").read_text(encoding="utf-8")
    sandbox_files = {"python_testcases/node.py": node_t, "python_programs/node.py": node_p}
    return TestSuite(
        mode="pytest",
        program_path=f"python_programs/{name}.py",
        module=f"python_programs.{name}",
        files=files,
        sandbox_files=sandbox_files,
        test_file=f"python_testcases/test_{name}.py",
        tests=tuple(tests),
        sys_path=(".", "python_testcases"),
        per_test_timeout=PER_TEST_TIMEOUT,
    )


def quixbugs_root() -> Path:
    """`data_root()/"quixbugs"`, checked for upstream's layout."""
    root = data_root() / "quixbugs"
    for sub in ("python_programs", "correct_python_programs", "python_testcases"):
        if not (root / sub).is_dir():
            raise QuixBugsLayoutError(f"{root} is not a QuixBugs folder (missing {sub}/)")
    return root


@functools.lru_cache(maxsize=4)
def _load(root_text: str) -> tuple[tuple[Task, ...], tuple[tuple[str, str], ...]]:
    root = Path(root_text)
    names = sorted(p.name[5:-3] for p in (root / "python_testcases").glob("test_*.py"))
    tasks = []
    refused: list[tuple[str, str]] = []
    for name in names:
        try:
            tasks.append(_task(root, name))
        except Exception as exc:  # noqa: BLE001 - one unreadable program must not lose the folder
            why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else str(exc)
            refused.append(
                (str(root / "python_testcases" / f"test_{name}.py"), f"program {name}: {why}"[:400])
            )
    return tuple(tasks), tuple(refused)


def _task(root: Path, name: str) -> Task:
    """The task of program `name` (raises on a missing, unreadable or malformed file)."""
    buggy_full = (root / "python_programs" / f"{name}.py").read_text(encoding="utf-8")
    fixed = (root / "correct_python_programs" / f"{name}.py").read_text(encoding="utf-8")
    test_src = (root / "python_testcases" / f"test_{name}.py").read_text(encoding="utf-8")
    buggy = strip_docstrings(buggy_full)
    description = _description(buggy_full)
    suite = _case_suite(name, test_src, root / "json_testcases") or _pytest_suite(name, root, test_src)
    test_names = suite.names()
    feats = program_features(buggy, name)
    feats.update(
        bug_class=bug_class_of(buggy_full, fixed),
        test_names=test_names,
        n_tests=len(test_names),
        boundary=boundary_of(description),
        lookalike="",
        source="quixbugs",
        test_mode=suite.mode,
    )
    prompt = (
        f"Fix the one-line bug in the Python function `{name}` so that its tests pass.\n"
        f"{description}\nReturn the whole corrected program.\n\n```python\n{buggy}```"
    )
    return Task(
        task_id=f"quixbugs-{name}",
        domain="code",
        prompt=prompt,
        env_id=f"quixbugs/{name}",
        reference=strip_docstrings(fixed),
        context="Tests: " + ", ".join(test_names[:40]),
        family=feats["bug_class"],
        features=feats,
        meta={"suite": suite.to_dict(), "buggy": buggy, "program": name},
    )


def load_quixbugs_tasks(
    root: str | Path | None = None, limit: int | None = None, report: LoadReport | None = None
) -> list[Task]:
    """The 40 QuixBugs tasks, sorted by program name (ids ``quixbugs-<name>``); `report` collects
    the refused programs instead of raising."""
    found, refused = _load(str(Path(root) if root else quixbugs_root()))
    if refused and report is None:
        raise QuixBugsLayoutError(refused_message(list(refused), "QuixBugs"))
    if report is not None:
        report.refused.extend(refused)
    tasks = list(found)
    return tasks[:limit] if limit is not None else tasks
