"""The generated code-repair benchmark (cm_gym/Code-v0), shipped with the package.

`data/generated_tasks.txt` holds small correct functions written by the cm_gym authors, their
named test inputs and seeded bugs (off-by-one, flipped comparison, wrong variable, missing base
case, swapped arguments, wrong operator/return/initial value, missing condition). One task per
(function, bug): the prompt shows the description and the buggy program; the reference is the
correct program; expected outputs are computed here, in process, from the reference (our own
code), and only ever compared in the parent — they never enter the sandbox. Look-alike pairs
(e.g. ``count_below`` with ``<`` next to ``count_at_most`` with ``<=``) share a family.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.code.program import boundary_of, program_features
from cm_gym.evaluators.testrun import Case, TestSuite, encode_expected

DATA_FILE = Path(__file__).parent / "data" / "generated_tasks.txt"
BENCHMARK = "Code"
PER_TEST_TIMEOUT = 1.0
_BUG = re.compile(r"^(\w+): (.*?) =>(?: (.*))?$")


class TemplateError(CmGymError):
    """The generated-task data file is malformed."""


@dataclass
class Template:
    name: str
    family: str = ""
    lookalike: str = ""
    description: str = ""
    source: str = ""
    tests: list[tuple[str, str]] = field(default_factory=list)
    bugs: list[tuple[str, str, str]] = field(default_factory=list)


def parse_templates(text: str) -> list[Template]:
    """Parse the data file format (see its header)."""
    templates: list[Template] = []
    section = ""
    body: list[str] = []

    def flush() -> None:
        if templates and section == "source":
            templates[-1].source = "\n".join(body).rstrip() + "\n"

    for raw in text.splitlines():
        if raw.startswith("#") and section != "source":
            continue
        if raw.startswith("=== "):
            flush()
            templates.append(Template(name=raw[4:].strip()))
            section, body = "header", []
        elif raw.startswith("--- "):
            flush()
            section, body = raw[4:].strip(), []
        elif not templates:
            continue
        elif section == "header" and ":" in raw:
            key, value = raw.split(":", 1)
            if key.strip() in ("family", "lookalike", "description"):
                setattr(templates[-1], key.strip(), value.strip())
        elif section == "source":
            body.append(raw)
        elif section == "tests" and raw.strip():
            name, args = raw.split(":", 1)
            templates[-1].tests.append((name.strip(), args.strip()))
        elif section == "bugs" and raw.strip():
            m = _BUG.match(raw)
            if not m:
                raise TemplateError(f"{templates[-1].name}: malformed bug line {raw!r}")
            old, new = (g.replace("\\n", "\n") for g in (m.group(2), m.group(3) or ""))
            templates[-1].bugs.append((m.group(1), old, new))
    flush()
    return templates


def _expected(template: Template) -> list[tuple[str, list[object], object]]:
    """Run the reference (our own code, in process) on each test input."""
    namespace: dict[str, object] = {}
    exec(compile(template.source, f"<{template.name}>", "exec"), namespace)  # noqa: S102 - trusted data
    fn = namespace[template.name]
    out = []
    for test_name, args_text in template.tests:
        args = list(ast.literal_eval(f"({args_text},)"))
        out.append((test_name, args, fn(*args)))  # type: ignore[operator]
    return out


def _prompt(template: Template, buggy: str) -> str:
    return (
        f"Fix the bug in the Python function `{template.name}`: {template.description}\n"
        f"Return the whole corrected program.\n\n```python\n{buggy}```"
    )


@functools.lru_cache(maxsize=4)
def _load(path: str) -> tuple[Task, ...]:
    templates = parse_templates(Path(path).read_text(encoding="utf-8"))
    tasks: list[Task] = []
    for template in templates:
        expected = _expected(template)
        cases = tuple(
            Case(name, f"{template.name}(*input_data)", args, encode_expected(value))
            for name, args, value in expected
        )
        suite = TestSuite(
            mode="cases",
            program_path="solution.py",
            module="solution",
            function=template.name,
            cases=cases,
            per_test_timeout=PER_TEST_TIMEOUT,
        )
        test_names = [c.name for c in cases]
        for bug_class, old, new in template.bugs:
            if template.source.count(old) != 1:
                raise TemplateError(f"{template.name}: bug snippet {old!r} must occur exactly once")
            buggy = template.source.replace(old, new)
            feats = program_features(buggy, template.name)
            feats.update(
                bug_class=bug_class,
                test_names=test_names,
                n_tests=len(test_names),
                boundary=boundary_of(template.description),
                lookalike=template.lookalike,
                source="generated",
            )
            tasks.append(
                Task(
                    task_id=f"codegen-{len(tasks):04d}",
                    domain="code",
                    prompt=_prompt(template, buggy),
                    env_id=f"codegen/{template.name}",
                    reference=template.source,
                    context="Tests: " + ", ".join(test_names),
                    family=template.family,
                    features=feats,
                    meta={"suite": suite.to_dict(), "buggy": buggy, "template": template.name},
                )
            )
    return tuple(tasks)


def load_generated_tasks(path: str | Path | None = None, limit: int | None = None) -> list[Task]:
    """The generated benchmark's tasks, deterministic (ids ``codegen-0000`` …)."""
    tasks = list(_load(str(path or DATA_FILE)))
    return tasks[:limit] if limit is not None else tasks
