"""Issue 33, item 1: built-ins register before any third-party plugin, a clash is refused with one
line naming both distributions (the built-in stays), strict mode stops with that line and no
traceback, `resolve()` wraps a plugin's import error, and overriding a name is explicit."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core import plugins
from cm_gym.core.plugins import PluginConflictError, PluginLoadError, PluginNotFoundError

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class _Dist:
    name: str


@dataclass
class _EP:
    """An installed entry point as importlib.metadata hands it out (name, value, group, dist)."""

    name: str
    value: str
    group: str
    dist: Any = None

    def load(self) -> Any:
        module, _, attr = self.value.partition(":")
        obj: Any = __import__(module, fromlist=["_"])
        return getattr(obj, attr) if attr else obj


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, eps: list[_EP]) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: [e for e in eps if e.group == group])


# -- cm_gym.core.plugins (learners, experiment backends) -------------------------------------------


def test_a_third_party_learner_sorting_first_cannot_replace_a_builtin(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("CM_GYM_STRICT_PLUGINS", raising=False)
    monkeypatch.setattr(plugins, "_REPORTED", set())
    _fake_entry_points(
        monkeypatch,
        [
            _EP("rllib-ppo", "cm_gym.backends.ray.rllib:LEARNER", "g.learners", _Dist("cm-gym")),
            _EP("rllib-ppo", "evil_mod:LEARNER", "g.learners", _Dist("aaa-evil")),  # listed second
        ],
    )
    with caplog.at_level(logging.WARNING, logger="cm_gym.core.plugins"):
        found = plugins.targets("g.learners")
        plugins.targets("g.learners")  # reported once, not per lookup
    assert found == {"rllib-ppo": "cm_gym.backends.ray.rllib:LEARNER"}
    (record,) = caplog.records
    line = record.getMessage()
    assert "\n" not in line and "aaa-evil" in line and "cm-gym" in line and "'rllib-ppo'" in line


def test_builtins_load_first_whatever_the_listing_order() -> None:
    evil = _EP("a", "evil:x", "g", _Dist("aaa"))
    own = _EP("z", "cm_gym.x:y", "g", _Dist("cm_gym"))
    bare = _EP("b", "cm_gym.domains.sql", "g")  # no metadata: a module of the cm_gym package
    assert plugins.ordered([evil, own, bare]) == [bare, own, evil]
    assert plugins.is_builtin(own) and plugins.is_builtin(bare) and not plugins.is_builtin(evil)


def test_strict_mode_makes_a_clash_one_cmgym_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_STRICT_PLUGINS", "1")
    _fake_entry_points(
        monkeypatch,
        [_EP("ray", "cm_gym.backends.ray.experiments:RayBackend", "g.b", _Dist("cm-gym")),
         _EP("ray", "evil:Backend", "g.b", _Dist("evil-dist"))],
    )  # fmt: skip
    with pytest.raises(PluginConflictError, match="evil-dist.*cm-gym") as info:
        plugins.targets("g.b")
    assert "\n" not in str(info.value)


def test_register_refuses_a_taken_name_unless_replace_and_logs_the_override(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(plugins, "_REGISTERED", {})
    _fake_entry_points(monkeypatch, [_EP("one", "json:dumps", "g.r", _Dist("cm-gym"))])
    with pytest.raises(PluginConflictError, match="replace=True"):
        plugins.register("g.r", "one", "json:loads")
    assert plugins.resolve("g.r", "one").__name__ == "dumps"
    plugins.register("g.r", "one", "json:dumps")  # the same target again is not a clash
    with caplog.at_level(logging.WARNING, logger="cm_gym.core.plugins"):
        plugins.register("g.r", "one", "json:loads", replace=True)
    assert plugins.resolve("g.r", "one").__name__ == "loads"
    assert any("replaces" in r.getMessage() and "json:dumps" in r.getMessage() for r in caplog.records)


def test_resolve_wraps_a_plugins_import_error_naming_group_and_plugin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "broken_learner_mod.py").write_text("import no_such_dependency_xyz\nLEARNER = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_entry_points(
        monkeypatch,
        [_EP("broken", "broken_learner_mod:LEARNER", "g.l", _Dist("x")),
         _EP("noattr", "json:no_such_attr", "g.l", _Dist("y"))],
    )  # fmt: skip
    with pytest.raises(PluginLoadError, match=r"g\.l plugin 'broken'.*ModuleNotFoundError") as info:
        plugins.resolve("g.l", "broken")
    assert isinstance(info.value, ImportError) and "\n" not in str(info.value)
    with pytest.raises(PluginLoadError, match=r"'noattr'.*AttributeError"):
        plugins.resolve("g.l", "noattr")
    with pytest.raises(PluginNotFoundError, match="broken, noattr"):
        plugins.resolve("g.l", "absent")


# -- the benchmark catalog (domains) --------------------------------------------------------------


def _reset_catalog(monkeypatch: pytest.MonkeyPatch, eps: list[_EP]) -> Any:
    import cm_gym.domains.catalog as catalog

    monkeypatch.setattr(catalog, "_loaded", False)
    monkeypatch.setattr(catalog, "_strict_failure", None)
    monkeypatch.setattr(catalog, "FAILED_PLUGINS", [])
    monkeypatch.setattr(plugins, "_REPORTED", set())
    real = catalog.entry_points

    def fake(group: str) -> list[Any]:
        return [*real(group=group), *(e for e in eps if e.group == group)]

    monkeypatch.setattr(catalog, "entry_points", fake)
    return catalog


def _evil_sql_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evil_sql_plugin.py").write_text(
        "from cm_gym.domains.registry import register_benchmark\n"
        "from tests.toy_domain import ToyDomain, toy_tasks\n"
        "register_benchmark('SQL', domain=ToyDomain, load_tasks=toy_tasks)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "evil_sql_plugin", raising=False)


def test_a_domain_plugin_claiming_sql_is_refused_in_one_line_and_sql_stays(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from cm_gym.domains.registry import get_benchmark

    monkeypatch.delenv("CM_GYM_STRICT_PLUGINS", raising=False)
    _evil_sql_module(tmp_path, monkeypatch)
    builtin = get_benchmark("SQL")
    catalog = _reset_catalog(
        monkeypatch, [_EP("aaa", "evil_sql_plugin", "cm_gym.domains", _Dist("evil-dist"))]
    )
    with caplog.at_level(logging.WARNING, logger="cm_gym.domains"):
        catalog.load_builtin_domains()
    assert get_benchmark("SQL") is builtin and get_benchmark("SpiderSQL").name == "SpiderSQL"
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    line = record.getMessage()
    assert "\n" not in line and "'SQL'" in line and "evil-dist" in line and "cm-gym" in line, line


def test_strict_mode_stops_on_the_clash_and_every_lookup_repeats_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CM_GYM_STRICT_PLUGINS", "1")
    _evil_sql_module(tmp_path, monkeypatch)
    catalog = _reset_catalog(
        monkeypatch, [_EP("aaa", "evil_sql_plugin", "cm_gym.benchmarks", _Dist("evil-dist"))]
    )
    with pytest.raises(PluginConflictError, match="evil-dist.*cm-gym"):
        catalog.load_builtin_domains()
    with pytest.raises(PluginConflictError):
        catalog.list_benchmarks()


def test_strict_mode_wraps_a_broken_plugin_as_one_cmgym_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "broken_domain_plugin.py").write_text("import no_such_dependency_abc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CM_GYM_STRICT_PLUGINS", "1")
    catalog = _reset_catalog(
        monkeypatch, [_EP("broken", "broken_domain_plugin", "cm_gym.benchmarks", _Dist("bad-dist"))]
    )
    with pytest.raises(PluginLoadError, match="broken.*bad-dist.*ModuleNotFoundError") as info:
        catalog.load_builtin_domains()
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_installed_plugin_that_sorts_first_cannot_replace_sql_end_to_end(tmp_path: Path) -> None:
    """A real installed distribution (dist-info on sys.path) in a fresh interpreter: the command
    lists the built-in SQL and SpiderSQL; strict mode is one error line with rc 2, no traceback."""
    site = tmp_path / "site"
    info = site / "evil_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[cm_gym.domains]\naaa = evil_sql_plugin\n")
    (site / "evil_sql_plugin.py").write_text(
        "from cm_gym.domains.registry import register_benchmark\n"
        "from tests.toy_domain import ToyDomain, toy_tasks\n"
        "register_benchmark('SQL', domain=ToyDomain, load_tasks=toy_tasks)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "CM_GYM_PROGRESS": "0"}
    env.pop("CM_GYM_STRICT_PLUGINS", None)
    cmd = [sys.executable, "-m", "cm_gym.cli", "benchmarks"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cm_gym/SpiderSQL-v0" in out.stdout and "domain=sql" in out.stdout
    assert "evil-plugin" in out.stderr and "cm-gym" in out.stderr
    strict = subprocess.run(
        cmd, capture_output=True, text=True, env={**env, "CM_GYM_STRICT_PLUGINS": "1"}, cwd=ROOT, timeout=120
    )
    assert strict.returncode == 2 and "Traceback" not in strict.stderr, strict.stderr
    assert strict.stderr.startswith("cm-gym: error: ") and "evil-plugin" in strict.stderr
