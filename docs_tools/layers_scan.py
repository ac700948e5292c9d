"""Scan cm_gym's imports with `ast` (module level, inside functions and under ``if TYPE_CHECKING:``)
and report the import circles (strongly connected groups of modules) and the arrows that run up the
layers.

Usage: ``python docs_tools/layers_scan.py [REPO_ROOT] [-v]``. The layer order is the one of
ARCHITECTURE.md; modules of the pre-issue-24 tree are mapped by `OLD_LAYOUT` so that the scan also
measures the tree before the move. import-linter (``lint-imports``) enforces the same rule in CI;
this script counts and names what it would refuse.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ORDER = [
    "core",
    "evaluators",
    "domains",
    "llm",
    "agent",
    "memory",
    "envs",
    "agents",
    "protocol",
    "studies",
    "backends",
    "cli",
    "root",
]

#: sub-package / module of cm_gym → layer; the longest matching prefix wins
LAYOUT = {name: name for name in ORDER if name != "root"}
OLD_LAYOUT = {
    **LAYOUT,
    "types": "core",
    "paths": "core",
    "splits": "core",
    "boundedjson": "core",
    "progress": "core",
    "quick": "core",
    "reference_guard": "domains",
    "registry": "domains",
    "catalog": "domains",
    "version": "core",
    "plugins": "core",
    "memory.conditions": "domains",
    "metrics": "envs",
    "domain_check": "domains",
    "agent": "agent",
    "prefetch": "agent",
    "features": "envs",
    "wrappers": "envs",
    "training": "protocol",
    "evaluation": "protocol",
    "report": "protocol",
    "provenance": "protocol",
    "outputs": "protocol",
    "experiments": "studies",
    "mechanisms": "studies",
    "analysis": "studies",
    "ray_backend": "backends",
    "tabulate": "cli",
    "datacheck": "cli",
    "loadcheck": "cli",
    "_compat": "root",
}


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name → file for every module of the cm_gym package under `root`."""
    out = {}
    for path in sorted((root / "cm_gym").rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _targets(mods: dict[str, Path], current: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = current.split(".")
        package = parts if mods[current].name == "__init__.py" else parts[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for annotations only."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _walk(node: ast.AST, type_checking: bool = True) -> list[ast.AST]:
    """Every node below `node` (without `type_checking`: except the bodies of
    ``if TYPE_CHECKING:`` blocks; their ``else`` runs)."""
    out = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        skip = not type_checking and _type_checking(current)
        children = current.orelse if skip else list(ast.iter_child_nodes(current))
        stack.extend(children)
    return out


def edges(root: Path, *, type_checking: bool = True) -> dict[str, set[str]]:
    """Module → the cm_gym modules it imports anywhere in its body: functions included, and
    imports for annotations only (under ``if TYPE_CHECKING:``) unless `type_checking` is False —
    a circle of types is still a circle (issue 35), and `lint-imports` counts them too."""
    mods = modules(root)
    out: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        for node in _walk(ast.parse(path.read_text(encoding="utf-8")), type_checking):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(mods, name, node):
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target.startswith("cm_gym") and target in mods and target != name:
                    out[name].add(target)
    return out


def layer(module: str, layout: dict[str, str]) -> str:
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in layout:
            return layout[key]
    return "root"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    group.append(top)
                    if top == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def upward(graph: dict[str, set[str]], layout: dict[str, str]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module sits in a higher layer. The package
    root (`cm_gym/__init__.py` and its compat shim) is the top and may import anything."""
    bad = []
    for a, targets in graph.items():
        for b in targets:
            la, lb = layer(a, layout), layer(b, layout)
            if (lb == "root" and la != "root" and b in ("cm_gym", "cm_gym._compat")) or ORDER.index(
                lb
            ) > ORDER.index(la):
                bad.append((a, b))
    return sorted(bad)


def main(argv: list[str]) -> int:
    root = Path(next((a for a in argv if not a.startswith("-")), "."))
    layout = LAYOUT if (root / "cm_gym" / "core").is_dir() else OLD_LAYOUT
    graph = edges(root)
    loops, ups = circles(graph), upward(graph, layout)
    print(f"{len(modules(root))} modules, {sum(map(len, graph.values()))} import arrows")
    print(f"{len(loops)} import circles:")
    for group in loops:
        print("  " + " <-> ".join(group))
    print(f"{len(ups)} upward arrows:")
    for a, b in ups:
        print(f"  {a} ({layer(a, layout)}) -> {b} ({layer(b, layout)})")
    return 1 if loops or ups else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
