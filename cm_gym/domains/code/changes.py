"""Code-repair environments that change: the code domain's change families, content version and
adaptation edits.

The world model of a code task is its test suite (``meta["suite"]``) run against the submitted
program. A change family returns changed *copies* of the generated benchmark's tasks (suite,
reference, the program shown in the prompt, context and features) and records the change in
``meta["environment_change"]``; nothing is written to disk. Expected outputs of new tests are
computed by running the reference (the cm_gym authors' own shipped code) in a worker process
under a CPU-time deadline per input (`_expected.py`): an input the reference raises on or never
halts on (``collatz_steps(0)``) adds no test. A task without such a reference (real QuixBugs data)
is left as it is.

* ``tests_added`` (tests) — every task gets boundary tests: each existing test with an integer
  argument is repeated with that argument one above and one below. A correction that only fixed
  the old tests can now fail.
* ``signature_changed`` (library) — the function's parameters come in the reverse order (the
  tests call ``f(*reversed(args))``, the given program and the reference say so): a record whose
  a⁺ defines the old signature now computes with swapped arguments.

Adaptation edit (re-verification only): a ``def`` of the task's function whose parameters are a
permutation of the signature the given program shows → that signature.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import Edit
from cm_gym.domains.environment import (
    CHANGE_META,
    ChangeFamily,
    EnvChange,
    change_marker,
    digest,
    touched_envs,
)
from cm_gym.evaluators.worker import Worker

#: CPU seconds the reference may spend on one added test's input (`_expected.py`); an input it
#: never halts on (``collatz_steps(0)``) is no test.
EXPECTED_CASE_S = 1.0
HANG_FACTOR = 20.0  # the worker's wall-clock hang guard, times its CPU budget


def environment_version(name: str, task: Task) -> str:
    """The env id, the test suite (inputs, calls and expected outputs) and a recorded change."""
    return digest(name, task.env_id, (task.meta or {}).get("suite"), change_marker(task))


def _def_line(name: str) -> re.Pattern[str]:
    return re.compile(rf"^(\s*def\s+{re.escape(name)}\s*\()([^)]*)(\)\s*:)", re.M)


def _generated(task: Task) -> str | None:
    """The function name of a task of the generated benchmark (None for other code tasks)."""
    meta = task.meta or {}
    suite = meta.get("suite") or {}
    if suite.get("mode") != "cases" or not meta.get("template") or not task.task_id.startswith("codegen"):
        return None
    return str(meta["template"])


def _expected(worker: Worker, task: Task, name: str, inputs: list[list[Any]]) -> list[tuple[bool, Any]]:
    """(True, the reference's encoded output) for each input, (False, why) where it raises or
    overruns its CPU budget."""
    cpu = EXPECTED_CASE_S * (len(inputs) + 4)
    for _attempt in range(2):
        res = worker.call("expected_outputs", task.reference, name, inputs, EXPECTED_CASE_S,
                          timeout=HANG_FACTOR * cpu, cpu_budget_s=cpu)  # fmt: skip
        if res.ok:
            return [(bool(ok), value) for ok, value in res.value]
        if res.status != "timeout":  # the hang guard alone is the machine's doing: try once more
            break
    raise CmGymError(
        f"{task.task_id}: the reference's outputs on the added tests could not be computed ({res.error})"
    )


def _tests_added(tasks: Sequence[Task], folder: Path, seed: int) -> tuple[list[Task], EnvChange]:
    out, changed = [], []
    with Worker("cm_gym.domains.code._expected", memory_mb=512) as worker:
        for task in tasks:
            name = _generated(task)
            if name is None:
                out.append(task)
                continue
            suite = dict(task.meta["suite"])
            cases = list(suite["cases"])
            names = {c["name"] for c in cases}
            new_cases = []
            for case in cases:
                args = list(case["input"])
                pos = next(
                    (i for i, a in enumerate(args) if isinstance(a, int) and not isinstance(a, bool)), None
                )
                if pos is None:
                    continue
                for delta, tag in ((1, "plus_one"), (-1, "minus_one")):
                    new_name = f"{case['name']}_{tag}"
                    if new_name not in names:
                        new_args = [*args[:pos], args[pos] + delta, *args[pos + 1 :]]
                        new_cases.append({"name": new_name, "expr": case["expr"], "input": new_args})
                        names.add(new_name)
            values = _expected(worker, task, name, [c["input"] for c in new_cases]) if new_cases else []
            cases += [{**c, "expected": v} for c, (ok, v) in zip(new_cases, values, strict=True) if ok]
            suite["cases"] = cases
            test_names = [c["name"] for c in cases]
            features = {**task.features, "test_names": test_names, "n_tests": len(test_names)}
            meta = {**task.meta, "suite": suite, CHANGE_META: {"tests": len(test_names)}}
            out.append(replace(task, context="Tests: " + ", ".join(test_names), features=features, meta=meta))
            changed.append(task.task_id)
    return out, EnvChange(
        "tests_added", f"boundary tests added to {len(changed)} tasks", {"seed": seed}, touched_envs(out), ()
    )


def _signature(tasks: Sequence[Task], folder: Path, seed: int) -> tuple[list[Task], EnvChange]:
    out, changed = [], []
    for task in tasks:
        name = _generated(task)
        match = _def_line(name).search(task.reference) if name else None
        params = [p.strip() for p in match.group(2).split(",") if p.strip()] if match else []
        if name is None or len(params) < 2 or any(("=" in p or "*" in p) for p in params):
            out.append(task)
            continue
        new_params = ", ".join(reversed(params))

        def flip(text: str, pattern: re.Pattern[str] = _def_line(name), new: str = new_params) -> str:
            return pattern.sub(lambda m: m.group(1) + new + m.group(3), text, count=1)

        suite = dict(task.meta["suite"])
        suite["cases"] = [{**c, "input": list(reversed(c["input"]))} for c in suite["cases"]]
        meta = {
            **task.meta,
            "suite": suite,
            "buggy": flip(str(task.meta.get("buggy", ""))),
            CHANGE_META: {"signature": f"{name}({new_params})"},
        }
        out.append(replace(task, reference=flip(task.reference), prompt=flip(task.prompt), meta=meta))
        changed.append(task.task_id)
    return out, EnvChange(
        "signature_changed",
        f"parameters reversed in {len(changed)} tasks' functions",
        {"seed": seed},
        touched_envs(out),
        tuple(changed),
    )


def adaptation_edits(task: Task, action: str) -> list[Edit]:
    """A def of the task's function whose parameters permute the shown signature → that one."""
    name = str((task.meta or {}).get("template") or (task.meta or {}).get("suite", {}).get("function") or "")
    shown = _def_line(name).search(str((task.meta or {}).get("buggy", ""))) if name else None
    mine = _def_line(name).search(action) if name else None
    if shown is None or mine is None:
        return []
    want = [p.strip() for p in shown.group(2).split(",") if p.strip()]
    have = [p.strip() for p in mine.group(2).split(",") if p.strip()]
    if want == have or sorted(want) != sorted(have):
        return []
    text = action[: mine.start(2)] + ", ".join(want) + action[mine.end(2) :]
    return [Edit(text, f"def:{name}", f"signature of {name} as the given program shows it")]


CHANGE_FAMILIES: dict[str, ChangeFamily] = {
    f.name: f
    for f in (
        ChangeFamily(
            "tests_added",
            "tests",
            "boundary tests (an integer argument ±1) added (generated Code)",
            _tests_added,
        ),
        ChangeFamily(
            "signature_changed",
            "library",
            "the function's parameters are reversed (generated Code)",
            _signature,
        ),
    )
}
