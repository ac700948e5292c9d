"""List the public names that a cm_gym module defined at some commit of the history and that no
longer resolve from that module (issue 33): the candidates for `cm_gym._compat.MOVED_NAMES`.

Usage: ``python docs_tools/moved_names_scan.py`` from the repository root (with the working tree's
cm_gym importable). For every ``cm_gym/**/*.py`` blob in ``git rev-list HEAD``, the module's
top-level ``def`` / ``class`` / assignments (and ``__all__``) without a leading underscore are
collected with `ast`; each name the current module lacks is printed with the current modules that
define it (its candidate new homes; none = removed, not moved). Each blob is read once.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import logging
import subprocess
import sys
import warnings
from collections import defaultdict
from pathlib import Path


def public_names(source: str) -> set[str]:
    """Top-level public definitions of a module's source (plus its ``__all__``)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    with contextlib.suppress(ValueError):
                        names.update(ast.literal_eval(node.value))
                elif isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def _module(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def main() -> int:
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    sys.path.insert(0, str(Path.cwd()))
    homes: dict[str, list[str]] = defaultdict(list)
    for path in Path("cm_gym").rglob("*.py"):
        for name in public_names(path.read_text(encoding="utf-8")):
            homes[name].append(_module(str(path)))
    blobs: dict[tuple[str, str], None] = {}
    for rev in _git("rev-list", "HEAD").split():
        for line in _git("ls-tree", "-r", rev, "cm_gym").splitlines():
            meta, path = line.split("\t")
            if path.endswith(".py"):
                blobs[(path, meta.split()[2])] = None
    missing: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for path, blob in sorted(blobs):
        module = _module(path)
        if module.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            names = public_names(_git("cat-file", "-p", blob))
            current = importlib.import_module(module)
        except (SyntaxError, ImportError) as exc:
            missing[module]["(module)"] = [type(exc).__name__]
            continue
        for name in sorted(names):
            if not hasattr(current, name):
                missing[module][name] = sorted(homes.get(name, []))
    for module, names in sorted(missing.items()):
        for name, where in sorted(names.items()):
            print(f"{module}:{name} -> {', '.join(where) or '(removed)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
