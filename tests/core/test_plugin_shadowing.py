"""Issue 36: running Python from a folder that holds a plugin's project folder shadows the
installed plugin (``python -c`` / ``-m`` put the current directory first on ``sys.path``), and the
load failed with ``module 'cm_gym_arith' has no attribute 'register'``. Now one
`PluginShadowedError` names the shadowing folder and the fixes; a plugin that is really broken
keeps its own error."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from collections.abc import Iterator
from importlib.abc import MetaPathFinder
from importlib.metadata import EntryPoint, distributions
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core import plugins
from cm_gym.core.plugins import PluginLoadError, PluginShadowedError
from cm_gym.domains import catalog

GROUP = "cm_gym.benchmarks"


def _dist_info(site: Path, dist: str, package: str, *, editable: Path | None = None) -> EntryPoint:
    """A distribution's metadata in `site`, as pip writes it, with one ``cm_gym.benchmarks`` entry
    point ``package:register``; returns that entry point (with its ``dist``)."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{dist} = {package}:register\n")
    if editable is not None:
        url = {"url": editable.as_uri(), "dir_info": {"editable": True}}
        (info / "direct_url.json").write_text(json.dumps(url))
    (found,) = distributions(path=[str(site)])
    (ep,) = found.entry_points
    return ep


def _package(folder: Path, name: str, body: str) -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(body)
    return folder / name


class _EditableFinder(MetaPathFinder):
    """What setuptools' editable install adds to ``sys.meta_path``: `name` → its project's copy.
    It is consulted after ``sys.path``, so a same-named folder there wins."""

    def __init__(self, name: str, init: Path) -> None:
        self.name, self.init = name, init

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.init, submodule_search_locations=[])


@pytest.fixture
def forget() -> Iterator[list[str]]:
    """Module names to drop from ``sys.modules`` after the test (each test imports its own)."""
    names: list[str] = []
    yield names
    for name in names:
        sys.modules.pop(name, None)


def test_the_project_folder_in_the_current_directory_shadows_an_editable_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget: list[str]
) -> None:
    """The issue's case: ``~/cm_gym_arith_x`` (the project: pyproject.toml and the package inside)
    is installed editable; Python started in ``~`` imports ``~/cm_gym_arith_x`` as a namespace
    package, which has no ``register``."""
    name = "cm_gym_arith_shadow_ns"
    forget.append(name)
    home = tmp_path / "home"
    project = home / name
    init = _package(project, name, "def register():\n    return 'registered'\n") / "__init__.py"
    (project / "pyproject.toml").write_text("[project]\nname = 'arith'\n")
    ep = _dist_info(tmp_path / "site", "arith-shadow-ns", name, editable=project)
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, _EditableFinder(name, init)])
    monkeypatch.syspath_prepend(str(home))  # what `python -c` does when started in ~

    with pytest.raises(PluginShadowedError) as caught:
        catalog.load_plugin(ep)
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, PluginLoadError)
    assert f"from {project} (a folder without __init__.py)" in message
    assert "another directory" in message and "python -I" in message and f"rename {project}" in message
    assert "arith-shadow-ns" in message  # the distribution whose plugin it is

    sys.modules.pop(name)  # run from elsewhere: the editable finder serves the real package
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(home)])
    assert ep.load()() == "registered"


def test_a_same_named_package_earlier_on_sys_path_shadows_the_installed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget: list[str]
) -> None:
    name = "cm_gym_shadow_pkg"
    forget.append(name)
    site = tmp_path / "site"
    _package(site, name, "def register():\n    pass\n")
    ep = _dist_info(site, "shadow-pkg", name)
    shadow = _package(tmp_path / "work", name, "VERSION = 'my checkout'\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path / "work"))  # before site: it wins

    with pytest.raises(
        PluginShadowedError, match="outside site-packages and the plugin's install location"
    ) as caught:
        catalog.load_plugin(ep)
    assert f"from {shadow} " in str(caught.value)


def test_a_broken_installed_plugin_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget: list[str]
) -> None:
    """The installed package itself lacks the attribute: a broken plugin, not a shadowed one."""
    name = "cm_gym_broken_pkg"
    forget.append(name)
    site = tmp_path / "site"
    _package(site, name, "def regist():\n    pass\n")
    ep = _dist_info(site, "broken-pkg", name)
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(AttributeError) as caught:
        catalog.load_plugin(ep)
    assert not isinstance(caught.value, PluginShadowedError)
    assert plugins.shadowing_message(ep) is None


def test_resolve_and_the_catalog_report_the_shadowing_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, forget: list[str]
) -> None:
    """`resolve` (learners, backends) raises it; loading the benchmark plugins logs it whole (not
    cut at 200 characters) and skips the plugin, or raises it under CM_GYM_STRICT_PLUGINS=1."""
    name = "cm_gym_shadow_resolve"
    forget.append(name)
    (tmp_path / "cwd" / name).mkdir(parents=True)  # a project folder, no __init__.py
    ep = _dist_info(tmp_path / "site", "shadow-resolve", name)
    monkeypatch.syspath_prepend(str(tmp_path / "cwd"))
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep] if group == GROUP else [])
    with pytest.raises(PluginShadowedError, match="python -I"):
        plugins.resolve(GROUP, "shadow-resolve")

    monkeypatch.delenv("CM_GYM_STRICT_PLUGINS", raising=False)
    with caplog.at_level(logging.WARNING, logger="cm_gym.domains"):
        catalog._load_one(ep, builtin=False)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("plugin 'shadow-resolve'") and line.endswith("(skipped)")
    assert str(tmp_path / "cwd" / name) in line and "python -I" in line
    monkeypatch.setenv("CM_GYM_STRICT_PLUGINS", "1")
    with pytest.raises(PluginShadowedError):
        catalog._load_one(ep, builtin=False)
