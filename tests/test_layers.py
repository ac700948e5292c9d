"""The package's imports follow its layers (ARCHITECTURE.md): no import circle between modules, no
arrow up the layers. `lint-imports` checks the same contracts in CI (pyproject.toml); this test
keeps the rule without import-linter installed and names the offending imports."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _scan() -> object:
    spec = importlib.util.spec_from_file_location("layers_scan", ROOT / "docs_tools" / "layers_scan.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_circle_and_no_upward_arrow() -> None:
    scan = _scan()
    graph = scan.edges(ROOT)
    assert len(graph) > 200  # the scan sees the package
    assert scan.circles(graph) == []
    assert scan.upward(graph, scan.LAYOUT) == []


def test_the_package_root_holds_only_the_entry_and_the_compat_shim() -> None:
    loose = sorted(p.name for p in (ROOT / "cm_gym").iterdir() if p.is_file())
    assert loose == ["__init__.py", "_compat.py", "py.typed"]
    layers = {p.name for p in (ROOT / "cm_gym").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert layers == {name for name in _scan().ORDER if name != "root"}


def test_the_scan_finds_a_circle_and_an_upward_arrow(tmp_path: Path) -> None:
    scan = _scan()
    pkg = tmp_path / "cm_gym"
    for sub in ("core", "cli"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from cm_gym.core import b\n")
    (pkg / "core" / "b.py").write_text(
        "def f():\n    from cm_gym.core import a\n    from cm_gym.cli import x\n"
    )
    (pkg / "cli" / "x.py").write_text("")
    graph = scan.edges(tmp_path)
    assert scan.circles(graph) == [["cm_gym.core.a", "cm_gym.core.b"]]
    assert scan.upward(graph, scan.LAYOUT) == [("cm_gym.core.b", "cm_gym.cli.x")]
