"""Move cm_gym's modules into the layer packages of ARCHITECTURE.md and rewrite every reference.

Usage: ``python docs_tools/move_layers.py [--tests] [--dry-run]`` from the repository root
(``--tests``: also move the tests of moved modules so that tests/ mirrors the package). Idempotent: a
module already in place is left alone, and a file that appears later at an old place (a branch
merged after the move) is moved the same way, so the script can be run again after every merge.
It moves with ``git mv`` (history follows), rewrites dotted names (``cm_gym.types`` →
``cm_gym.core.types``), ``from cm_gym import features`` forms and source paths
(``cm_gym/metrics.py``) in the package, tests, benches, examples, docs and configuration. The old
dotted names keep importing through `cm_gym._compat` (generated from `MOVES` here).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

#: old module or package (dotted, under cm_gym) → new place; packages move with everything in them
MOVES: dict[str, str] = {
    # 1. core: the vocabulary and small shared utilities
    "types": "core.types",
    "paths": "core.paths",
    "splits": "core.splits",
    "boundedjson": "core.boundedjson",
    "progress": "core.progress",
    "quick": "core.quick",
    "version": "core.version",
    "plugins": "core.plugins",
    # 3. domains: the registry, the checker, the condition grammar
    "registry": "domains.registry",
    "catalog": "domains.catalog",
    "domain_check": "domains.check",
    "reference_guard": "domains.reference_guard",
    "memory.conditions": "domains.conditions",
    # 5. agent: the base agent loop (agent.py becomes the package itself) and prefetching
    "prefetch": "agent.prefetch",
    # 7. envs: observation features, episode metrics, wrappers
    "features": "envs.features",
    "metrics": "envs.metrics",
    "wrappers": "envs.wrappers",
    # 9. protocol
    "training": "protocol.training",
    "evaluation": "protocol.evaluation",
    "report": "protocol.report",
    "provenance": "protocol.provenance",
    "outputs": "protocol.outputs",
    # 10. studies
    "experiments": "studies.experiments",
    "mechanisms": "studies.mechanisms",
    "analysis": "studies.analysis",
    # 11. backends
    "ray_backend": "backends.ray",
    # 12. cli
    "tabulate": "cli.tabulation",
    "datacheck": "cli.datacheck",
    "loadcheck": "cli.loadcheck",
    # the same file names for the same roles in every domain package (ARCHITECTURE.md)
    "domains.sql.errors": "domains.sql.errormodel",
    "domains.sql.spider": "domains.sql.loader",
    "domains.humaneval.model": "domains.humaneval.errormodel",
    "domains.code.records": "domains.code.conditions",
    "domains.dafny.records": "domains.dafny.conditions",
    "domains.math.records": "domains.math.conditions",
    "domains.code.quixbugs": "domains.code.loader",
    "domains.code.mutations": "domains.code.edits",
    "domains.sat.satlib": "domains.sat.loader",
    "domains.sat.generate": "domains.sat.generated",
    "domains.smt.generate": "domains.smt.generated",
}

#: tests follow their modules (tests/ mirrors the package): old path under tests/ → new path
TEST_MOVES: dict[str, str] = {
    "experiments": "studies/experiments",
    "mechanisms": "studies/mechanisms",
    "analysis": "studies/analysis",
    "ray_backend": "backends/ray",
    "wrappers": "envs/wrappers",
    "test_types.py": "core/test_types.py",
    "test_splits.py": "core/test_splits.py",
    "test_progress.py": "core/test_progress.py",
    "test_data_root.py": "core/test_data_root.py",
    "test_registry.py": "domains/test_registry.py",
    "test_plugin_kit.py": "domains/test_plugin_kit.py",
    "test_features.py": "envs/test_features.py",
    "test_metrics.py": "envs/test_metrics.py",
    "test_agent.py": "agent/test_agent.py",
    "test_protocol.py": "protocol/test_protocol.py",
    "test_protocol_recorded.py": "protocol/test_protocol_recorded.py",
    "test_rotation.py": "protocol/test_rotation.py",
    "test_statistics.py": "protocol/test_statistics.py",
    "test_evaluate_custom.py": "protocol/test_evaluate_custom.py",
    "test_tabulate.py": "cli/test_tabulate.py",
    "test_cli_outputs.py": "cli/test_cli_outputs.py",
    "test_rllib.py": "backends/ray/test_rllib.py",
}

#: a module that becomes a package under the same name (its code in ``__init__.py``)
TO_PACKAGE = ("agent",)

NEW_PACKAGES = {
    "core": "The vocabulary (tasks, states, actions, outcomes, splits), paths, errors and small shared\n"
    "utilities: the bottom layer, importing nothing else of cm_gym.",
    "studies": "Studies built on the protocol: experiments (the paper's tables, ablations), the memory\n"
    "mechanisms compared against, and analyses of runs and real model outputs.",
    "backends": "Optional execution backends (Ray): they plug into the protocol and the experiment runner\n"
    "through named plugins (`cm_gym.core.plugins`); nothing below imports them.",
}

#: text files whose references are rewritten
TEXT_ROOTS = ("cm_gym", "tests", "bench", "examples", "docs", "docs_tools")
TEXT_FILES = ("README.md", "ARCHITECTURE.md", "mkdocs.yml", "pyproject.toml", "evaluate.py", "train.py")
SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ini", ".json"}
#: files that name the old modules on purpose (the compat table and its test, the scan's old layout)
SKIP = {
    "docs_tools/move_layers.py",
    "docs_tools/layers_scan.py",
    "cm_gym/_compat.py",
    "cm_gym/__init__.py",
    "tests/test_compat.py",
    "ARCHITECTURE.md",
}


def git(*args: str, dry: bool = False) -> None:
    print("git", *args)
    if not dry:
        subprocess.run(["git", *args], check=True)


def _path(dotted: str, package: bool) -> Path:
    return (
        Path("cm_gym", *dotted.split("."))
        if package
        else Path("cm_gym", *dotted.split(".")).with_suffix(".py")
    )


def _ensure_package(folder: Path, dry: bool) -> None:
    """Create `folder` (and its parents under cm_gym) as packages."""
    for part in reversed([folder, *folder.parents]):
        if part == Path("cm_gym") or Path("cm_gym") not in part.parents:
            continue
        init = part / "__init__.py"
        if not init.exists():
            doc = NEW_PACKAGES.get(part.name, f"The {part.name} package.")
            print("create", init)
            if not dry:
                part.mkdir(parents=True, exist_ok=True)
                init.write_text(f'"""{doc}"""\n', encoding="utf-8")
                subprocess.run(["git", "add", str(init)], check=True)


def move_files(dry: bool) -> list[str]:
    """git mv every module still at an old place; returns the conflicts left for a person."""
    problems = []
    for name in TO_PACKAGE:
        src, dst = Path("cm_gym", f"{name}.py"), Path("cm_gym", name, "__init__.py")
        if src.is_file():
            if dst.exists():
                problems.append(f"{src} and {dst} both exist: merge them by hand")
                continue
            if not dry:
                dst.parent.mkdir(parents=True, exist_ok=True)
            git("mv", str(src), str(dst), dry=dry)
    for old, new in MOVES.items():
        old_pkg, new_pkg = _path(old, True), _path(new, True)
        if old_pkg.is_dir():
            for src in sorted(p for p in old_pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                dst = new_pkg / src.relative_to(old_pkg)
                if dst.exists():
                    problems.append(f"{src} and {dst} both exist: merge them by hand")
                    continue
                _ensure_package(new_pkg.parent, dry)
                if not dry:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                tracked = subprocess.run(
                    ["git", "ls-files", "--error-unmatch", str(src)], capture_output=True
                )
                if tracked.returncode == 0:
                    git("mv", str(src), str(dst), dry=dry)
                elif not dry:
                    src.rename(dst)
            if not dry:
                for leftover in sorted(old_pkg.rglob("__pycache__"), reverse=True):
                    subprocess.run(["rm", "-rf", str(leftover)], check=True)
                for folder in sorted((p for p in [old_pkg, *old_pkg.rglob("*")] if p.is_dir()), reverse=True):
                    if not any(folder.iterdir()):
                        folder.rmdir()
            continue
        src, dst = _path(old, False), _path(new, False)
        if src.is_file():
            if dst.exists():
                problems.append(f"{src} and {dst} both exist: merge them by hand")
                continue
            _ensure_package(dst.parent, dry)
            git("mv", str(src), str(dst), dry=dry)
    return problems


def move_tests(dry: bool) -> list[str]:
    """git mv the tests of moved modules to the mirrored place (a package folder where the old one
    was one: an ``__init__.py`` in each new folder)."""
    problems = []
    for old, new in TEST_MOVES.items():
        src, dst = Path("tests", old), Path("tests", new)
        if not src.exists():
            continue
        files = (
            sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
            if src.is_dir()
            else [src]
        )
        for file in files:
            target = dst / file.relative_to(src) if src.is_dir() else dst
            if target.exists():
                problems.append(f"{file} and {target} both exist: merge them by hand")
                continue
            # new folders become packages, except the one a moved folder brings its own __init__ to
            leaf_has_init = src.is_dir() and (src / "__init__.py").exists()
            for folder in reversed([target.parent, *target.parent.parents]):
                if folder == Path("tests") or Path("tests") not in folder.parents or folder.exists():
                    continue
                if folder == target.parent and (leaf_has_init or src.is_dir()):
                    continue
                if not dry:
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / "__init__.py").write_text("", encoding="utf-8")
                    subprocess.run(["git", "add", str(folder / "__init__.py")], check=True)
            if not dry:
                target.parent.mkdir(parents=True, exist_ok=True)
            git("mv", str(file), str(target), dry=dry)
        if src.is_dir() and not dry:
            subprocess.run(["rm", "-rf", *map(str, src.rglob("__pycache__"))], check=True)
            for folder in sorted((p for p in [src, *src.rglob("*")] if p.is_dir()), reverse=True):
                if not any(folder.iterdir()):
                    folder.rmdir()
    return problems


def _dotted_rules(tests: bool) -> list[tuple[re.Pattern[str], str]]:
    rules = []
    for old, new in sorted(TEST_MOVES.items() if tests else (), key=lambda kv: -len(kv[0])):
        if not old.endswith(".py"):
            dotted_old, dotted_new = old.replace("/", "."), new.replace("/", ".")
            rules.append(
                (re.compile(rf"(?<![\w.])tests\.{re.escape(dotted_old)}(?![\w])"), f"tests.{dotted_new}")
            )
        rules.append((re.compile(rf"(?<![\w/])tests/{re.escape(old)}(?![\w])"), f"tests/{new}"))
    for old, new in sorted(MOVES.items(), key=lambda kv: -len(kv[0])):
        rules.append((re.compile(rf"(?<![\w.])cm_gym\.{re.escape(old)}(?![\w])"), f"cm_gym.{new}"))
        rules.append(
            (
                re.compile(rf"(?<![\w/])cm_gym/{re.escape(old.replace('.', '/'))}(?=/|\.py\b)"),
                f"cm_gym/{new.replace('.', '/')}",
            )
        )
    rules.append((re.compile(r"(?<![\w/])cm_gym/agent\.py\b"), "cm_gym/agent/__init__.py"))
    return rules


_FROM_ROOT = re.compile(
    r"^(?P<indent>\s*)from (?P<package>cm_gym(?:\.\w+)*) import (?P<name>\w+)(?P<alias> as \w+)?(?P<rest>.*)$",
    re.M,
)


def _from_root(match: re.Match[str]) -> str:
    """``from cm_gym[.package] import <moved module>`` → its new package and name."""
    name = match["name"]
    old = f"{match['package']}.{name}".removeprefix("cm_gym.")
    if old not in MOVES or "," in match["rest"]:
        return match[0]
    parent, _, leaf = f"cm_gym.{MOVES[old]}".rpartition(".")
    alias = match["alias"] or ("" if leaf == name else f" as {name}")
    return f"{match['indent']}from {parent} import {leaf}{alias}{match['rest']}"


def rewrite(text: str, tests: bool = False) -> str:
    for pattern, new in _dotted_rules(tests):
        text = pattern.sub(new, text)
    return _FROM_ROOT.sub(_from_root, text)


def rewrite_files(dry: bool, tests: bool = False) -> int:
    files = [Path(f) for f in TEXT_FILES if Path(f).is_file()]
    for root in TEXT_ROOTS:
        files += [p for p in Path(root).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    changed = 0
    for path in files:
        if path.as_posix() in SKIP or "__pycache__" in path.parts or ".venv" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text, tests)
        if new != text:
            changed += 1
            print("rewrite", path)
            if not dry:
                path.write_text(new, encoding="utf-8")
    return changed


#: (file, old text, new text): what depends on a module's depth or on paths inside the package
FIXUPS = (
    (
        "cm_gym/protocol/provenance.py",
        "root = Path(__file__).resolve().parents[1]",
        "root = Path(__file__).resolve().parents[2]",
    ),
    (
        "cm_gym/studies/experiments/unit.py",
        "root = Path(__file__).resolve().parents[1]",
        "root = Path(__file__).resolve().parents[2]",
    ),
    (
        "cm_gym/core/paths.py",
        'Path(__file__).resolve().parents[2] / "shared"',
        'Path(__file__).resolve().parents[3] / "shared"',
    ),
    (
        "cm_gym/studies/experiments/unit.py",
        '_NOT_IN_CODE_VERSION = ("cli/", "report.py", "experiments/")',
        '_NOT_IN_CODE_VERSION = ("cli/", "protocol/report.py", "studies/experiments/")',
    ),
    (
        "cm_gym/studies/experiments/unit.py",
        '_IN_CODE_VERSION = (\n    "experiments/units.py",\n    "experiments/units_change.py",\n    "experiments/unit.py",\n    "experiments/runner.py",\n)',
        '_IN_CODE_VERSION = (\n    "studies/experiments/units.py",\n    "studies/experiments/units_change.py",\n    "studies/experiments/unit.py",\n    "studies/experiments/runner.py",\n)',
    ),
    (
        "cm_gym/memory/defaults.py",
        '_CORE_SOURCES = ("memory", "agent.py", "llm/simulated.py", "llm/prompts.py", "llm/parsers.py")',
        '_CORE_SOURCES = (\n    "memory",\n    "domains/conditions.py",\n    "agent/__init__.py",\n    "llm/simulated.py",\n    "llm/prompts.py",\n    "llm/parsers.py",\n)',
    ),
)


def test_fixups(dry: bool) -> None:
    """A moved test one folder deeper finds the repository one more level up."""
    for old, new in TEST_MOVES.items():
        if not old.endswith(".py"):
            continue
        path = Path("tests", new)
        depth = len(Path(new).parts)
        old_text = "REPO = Path(__file__).resolve().parents[1]"
        if path.is_file() and old_text in (text := path.read_text(encoding="utf-8")):
            print("fixup", path)
            if not dry:
                path.write_text(text.replace(old_text, f"REPO = Path(__file__).resolve().parents[{depth}]"))


def fixups(dry: bool) -> None:
    for file, old, new in FIXUPS:
        path = Path(file)
        if path.is_file() and old in (text := path.read_text(encoding="utf-8")):
            print("fixup", file)
            if not dry:
                path.write_text(text.replace(old, new), encoding="utf-8")


def main(argv: list[str]) -> int:
    dry = "--dry-run" in argv
    problems = move_files(dry)
    if "--tests" in argv:
        problems += move_tests(dry)
    n = rewrite_files(dry, "--tests" in argv)
    fixups(dry)
    if "--tests" in argv:
        test_fixups(dry)
    print(f"{n} files rewritten")
    for p in problems:
        print("CONFLICT:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
