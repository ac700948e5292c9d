"""No two cm_gym modules import each other, directly or around a circle (issue 35): every import
counts — at the top of a module, inside a function (a lazy import), or under ``if TYPE_CHECKING:``
(a circle of types is a circle of knowledge even if Python never runs it). grimp builds the graph,
as `lint-imports` does; the `acyclic_siblings` contract in pyproject.toml checks the same in CI.
A failure names each circle and the import lines that close it."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

grimp = pytest.importorskip("grimp")  # installed with import-linter (the dev extra)


def strongly_connected(graph: object) -> list[list[str]]:
    """The groups of two or more modules of `graph` (a grimp ImportGraph) that reach each other
    (Tarjan's algorithm, iterative), each sorted, sorted by their first module."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def shortest_circle(graph: object, group: Iterable[str]) -> list[str]:
    """One shortest circle through the first module of `group` (a strongly connected group)."""
    members = sorted(group)
    start, inside = members[0], set(members)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.find_modules_directly_imported_by(node)):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in inside and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return members


def describe(graph: object, groups: list[list[str]]) -> str:
    lines = []
    for group in groups:
        circle = shortest_circle(graph, group)
        lines.append(f"import circle: {' -> '.join(circle)}")
        for importer, imported in zip(circle, circle[1:], strict=False):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"    {importer}:{detail['line_number']}: {detail['line_contents']}")
    return "\n".join(lines)


def test_no_import_circle_between_cm_gym_modules() -> None:
    graph = grimp.build_graph("cm_gym", exclude_type_checking_imports=False, cache_dir=None)
    assert len(graph.modules) > 200  # grimp sees the package
    groups = strongly_connected(graph)
    assert groups == [], "\n" + describe(graph, groups)


def test_the_check_finds_a_circle_closed_by_a_lazy_or_type_only_import() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b", line_number=1, line_contents="from pkg import b")
    graph.add_import(importer="pkg.b", imported="pkg.c", line_number=1, line_contents="from pkg import c")
    graph.add_import(
        importer="pkg.c", imported="pkg.a", line_number=9, line_contents="from pkg.a import A  # lazy"
    )
    graph.add_import(importer="pkg.d", imported="pkg.a", line_number=1, line_contents="import pkg.a")
    groups = strongly_connected(graph)
    assert groups == [["pkg.a", "pkg.b", "pkg.c"]]
    text = describe(graph, groups)
    assert "pkg.a -> pkg.b -> pkg.c -> pkg.a" in text
    assert "pkg.c:9: from pkg.a import A  # lazy" in text
