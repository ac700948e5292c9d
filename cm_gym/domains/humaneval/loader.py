"""CodeHumanEval tasks: a HumanEval problem's docstring plus its canonical solution with one
injected bug (`inject.py`), tested by its own ``check`` asserts (`checks.py`).

Data: ``<root>/HumanEval.jsonl.gz`` (or ``HumanEval.jsonl``), default ``data_root()/"humaneval"``;
each line has ``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point``. The program
a task shows is ``prompt + buggy body``; the reference is ``prompt + canonical_solution``. A problem
whose ``check`` converts fully is judged in *cases* mode (the judge compares values); one with any
unconvertible statement in *pytest* mode (its ``check`` runs in the judge, the entry point is a
remote call into the program). In pytest mode every other function the reference defines — the
prompt's helpers the tests call, ``poly`` (HumanEval/32), ``encode_cyclic`` (/38), ``encode_shift``
(/50), ``is_palindrome`` (/10) — is imported from a frozen copy of the reference module
(``_cm_reference.py``, prompt + canonical solution) on the judge's side, never from the program:
a program that redefines a helper changes only its own code, not what the tests call. Converted
cases the canonical solution does not pass are dropped and reported.
Bug vetting results are cached under ``CM_GYM_CACHE/humaneval`` keyed by the data and this
package's sources, so only the first load runs it.
"""

from __future__ import annotations

import ast
import functools
import gzip
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import cache_dir, data_root
from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import LoadReport, refused_message, source_digest
from cm_gym.domains.code.program import program_features
from cm_gym.domains.humaneval.checks import convert_check
from cm_gym.domains.humaneval.families import docstring_of, shape_features
from cm_gym.domains.humaneval.inject import InjectedBug, Injector
from cm_gym.evaluators.testrun import TestSuite

logger = logging.getLogger(__name__)
PER_TEST_TIMEOUT = 3.0
#: the judge-side module holding the frozen reference (prompt + canonical solution) of a task
REFERENCE_MODULE = "_cm_reference"
MAX_BYTES = 64 * 1024 * 1024
FILES = ("HumanEval.jsonl.gz", "HumanEval.jsonl")
LAYOUT = "HumanEval layout: HumanEval.jsonl.gz (or .jsonl) with task_id, prompt, canonical_solution, test, entry_point"


class HumanEvalLayoutError(CmGymError):
    """The HumanEval folder or file is missing or malformed."""


def humaneval_file(root: Path | str | None = None) -> Path:
    """The problems file in `root` (default ``data_root()/"humaneval"``)."""
    folder = Path(root) if root is not None else data_root() / "humaneval"
    for name in FILES:
        if (folder / name).is_file():
            return folder / name
    raise HumanEvalLayoutError(
        f"{folder} has no {' or '.join(FILES)}: point --data at a folder in the {LAYOUT}"
    )


def read_problems(path: Path, refused: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """The problems of a HumanEval file (each line one JSON object with the five fields). A line
    that is not one is refused: listed in `refused` when given (the rest load), else an error."""
    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise HumanEvalLayoutError(f"{path} cannot be read ({exc}); expected the {LAYOUT}") from None
    rows = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            row = boundedjson.loads(line, max_bytes=MAX_BYTES, what=f"{path}: line {i + 1}")
            if not isinstance(row, dict):
                raise HumanEvalLayoutError(f"{path}: line {i + 1} is not a JSON object")
            missing = [
                k for k in ("task_id", "prompt", "canonical_solution", "test", "entry_point")
                if not isinstance(row.get(k), str)
            ]  # fmt: skip
            if missing:
                raise HumanEvalLayoutError(f"{path}: line {i + 1} lacks {', '.join(missing)}")
        except boundedjson.BoundedJSONError as exc:
            why = str(exc)
            if refused is None:
                raise HumanEvalLayoutError(why) from None
            refused.append((f"{path}:{i + 1}", why))
            continue
        except HumanEvalLayoutError as exc:
            if refused is None:
                raise
            refused.append((f"{path}:{i + 1}", str(exc)))
            continue
        rows.append(row)
    return rows


def _suite(row: dict[str, Any], report: LoadReport) -> TestSuite:
    fn = row["entry_point"]
    conv = convert_check(row["test"], fn)
    if not conv.unconvertible and conv.cases:
        return TestSuite(mode="cases", program_path="solution.py", module="solution", function=fn,
                         cases=tuple(conv.cases), per_test_timeout=PER_TEST_TIMEOUT)  # fmt: skip
    for text, why in conv.unconvertible:
        report.notes.append((row["task_id"], f"judged in pytest mode: `{text}` ({why})"))
    reference = row["prompt"] + row["canonical_solution"]
    helpers = sorted(set(_top_level_names(reference)) - {fn})
    test = f"from solution import {fn}\n"  # the entry point: a remote call into the program
    if helpers:  # everything else the tests may call: the judge's frozen copy of the reference
        test += f"from {REFERENCE_MODULE} import {', '.join(helpers)}\n"
    test += f"\n{row['test']}\n\ndef test_check():\n    check({fn})\n"
    files = {"test_humaneval.py": test, f"{REFERENCE_MODULE}.py": reference}
    return TestSuite(mode="pytest", program_path="solution.py", module="solution",
                     files=files, test_file="test_humaneval.py",
                     tests=(("check", "test_check", None),), per_test_timeout=PER_TEST_TIMEOUT * 10)  # fmt: skip


def _top_level_names(source: str) -> list[str]:
    """The functions and classes `source` defines at module level (what an import can bind)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]


def _prompt(row: dict[str, Any], buggy: str) -> str:
    return (
        f"Fix the bug in the Python function `{row['entry_point']}` so that it does what its "
        f"docstring says.\nReturn the whole corrected program.\n\n```python\n{buggy}```"
    )


def _task(row: dict[str, Any], suite: TestSuite, bug: InjectedBug) -> Task:
    fn = row["entry_point"]
    doc = docstring_of(row["prompt"], fn)
    feats = program_features(bug.program, fn)
    feats.update(shape_features(bug.program, fn, doc))
    names = suite.names()
    feats.update(bug_class=bug.family, test_names=names, n_tests=len(names), lookalike="",
                 source="humaneval", test_mode=suite.mode, docstring=doc[:2000])  # fmt: skip
    number = row["task_id"].rsplit("/", 1)[-1]
    return Task(
        task_id=f"humaneval-{number}-{bug.family}",
        domain="humaneval",
        prompt=_prompt(row, bug.program),
        env_id=f"humaneval/{number}",
        reference=row["prompt"] + row["canonical_solution"],
        context="Tests: " + ", ".join(names[:40]),
        family=bug.family,
        features=feats,
        meta={
            "suite": suite.to_dict(),
            "buggy": bug.program,
            "problem": row["task_id"],
            "injected": bug.description,
        },  # fmt: skip
    )


def _digest(path: Path) -> str:
    h = hashlib.sha256(path.read_bytes())
    h.update(source_digest(Injector).encode())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def vetted_problems(
    path_text: str,
) -> tuple[tuple[tuple[dict[str, Any], TestSuite, tuple[InjectedBug, ...]], ...], LoadReport]:
    """Every problem of the file with its suite (cases the canonical solution fails removed) and
    its vetted bugs (possibly none), plus what loading saw; vetting is cached (module doc)."""
    path = Path(path_text)
    report = LoadReport()
    rows = read_problems(path, report.refused)
    cache_file = cache_dir("humaneval") / f"vetted-{_digest(path)}.json"
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8")) if cache_file.is_file() else {}
    except (OSError, json.JSONDecodeError):
        cached = {}
    injector = Injector(cached)
    problems = []
    try:
        for row in rows:
            suite, bugs = injector.bugs_for(row, _suite(row, report), report)
            problems.append((row, suite, tuple(bugs)))
    finally:
        injector.close()
    if injector.changed:
        tmp = cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(injector.cache), encoding="utf-8")
        tmp.replace(cache_file)
    return tuple(problems), report


@functools.lru_cache(maxsize=4)
def _load(path_text: str) -> tuple[tuple[Task, ...], LoadReport]:
    problems, report = vetted_problems(path_text)
    return tuple(_task(row, suite, bug) for row, suite, bugs in problems for bug in bugs), report


def load_humaneval_tasks(
    root: Path | str | None = None, limit: int | None = None, report: LoadReport | None = None
) -> list[Task]:
    """CodeHumanEval's tasks (ids ``humaneval-<n>-<family>``), in problem order."""
    tasks, seen = _load(str(humaneval_file(root)))
    if seen.unverified:  # a vetting run the hang guard stopped: try again on the next load
        _load.cache_clear()
    if seen.refused and report is None:
        raise HumanEvalLayoutError(refused_message(list(seen.refused), "HumanEval"))
    if report is not None:
        for part in ("refused", "dropped", "notes", "unverified"):
            getattr(report, part).extend(getattr(seen, part))
    return list(tasks[:limit] if limit is not None else tasks)
