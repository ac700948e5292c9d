"""A first hour without surprises (issue 26): CM_GYM_QUICK's smoke sizes (explicit options win),
`evaluate --help` without training-only options (still accepted), the nearly-empty-store warning,
and the example plugin's default store holding a record for every slip family."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cm_gym.cli import make_parser
from cm_gym.cli.evaluate import TRAINING_ONLY
from cm_gym.cli.run import config_from
from cm_gym.core.quick import PROTOCOL_SIZES, protocol_overrides, quick_mode
from cm_gym.memory.defaults import MIN_USEFUL_RECORDS, warn_if_nearly_empty
from cm_gym.protocol import ProtocolConfig

REPO = Path(__file__).resolve().parents[1]


def test_quick_sizes_apply_only_to_what_the_command_line_leaves_unset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CM_GYM_QUICK", raising=False)
    args = make_parser().parse_args(["run", "--seeds", "3", "4"])
    assert not quick_mode() and protocol_overrides(["seeds"]) == {}
    full = config_from(args)
    assert (full.seeds, full.total_decisions, full.n_eval) == ((3, 4), ProtocolConfig().total_decisions, None)

    monkeypatch.setenv("CM_GYM_QUICK", "1")
    quick = config_from(make_parser().parse_args(["run", "--seeds", "3", "4"]))
    assert quick.seeds == (3, 4)  # given: kept
    assert quick.total_decisions == PROTOCOL_SIZES["total_decisions"] < ProtocolConfig().total_decisions
    assert (quick.n_build, quick.n_train, quick.n_eval) == tuple(
        PROTOCOL_SIZES[k] for k in ("n_build", "n_train", "n_eval")
    )
    assert "CM_GYM_QUICK=1" in capsys.readouterr().err  # said once, on stderr
    given = config_from(make_parser().parse_args(["train", "--total-decisions", "50"]))
    assert given.total_decisions == 50 and given.seeds == PROTOCOL_SIZES["seeds"]


def test_quick_makes_experiment_runs_quick(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from cm_gym.cli import experiment

    seen = {}

    def fake_run(names: object, cfg: object) -> dict:
        seen["cfg"] = cfg
        return {}

    monkeypatch.setattr(experiment, "run_experiments", fake_run)
    monkeypatch.setenv("CM_GYM_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    experiment.run(make_parser().parse_args(["experiment", "table1"]))
    assert seen["cfg"].quick and str(seen["cfg"].results_dir) == "runs/experiments-quick"


def test_evaluate_help_lists_no_training_only_option_but_accepts_them() -> None:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["evaluate"]
    help_text = sub.format_help()
    for name in TRAINING_ONLY:
        assert f"--{name.replace('_', '-')} " not in help_text, name
    for kept in ("--n-eval", "--seeds", "--store", "--policy", "--k"):
        assert kept in help_text
    args = parser.parse_args(["evaluate", "--total-decisions", "10", "--n-build", "5"])  # old command lines
    assert (args.total_decisions, args.n_build) == (10, 5)
    run_help = next(a for a in parser._actions if a.dest == "command").choices["run"].format_help()
    assert "--total-decisions" in run_help  # training commands keep them


def test_a_nearly_empty_store_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert warn_if_nearly_empty("store x.sqlite", MIN_USEFUL_RECORDS, 40) is None
        message = warn_if_nearly_empty("store x.sqlite", 1, 56)
    assert message is not None and "only 1 record(s) from 56 build task(s)" in message
    assert [r.getMessage() for r in caplog.records] == [message]


def test_a_nearly_empty_default_store_is_warned_about_once_in_one_line_naming_its_page(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Below the `check-domain --strict` threshold a default store's gym.make logs one WARNING line
    naming the id's docs page (once per store per process); at the threshold, nothing."""
    from cm_gym.cli.check_domain import MIN_DEFAULT_RECORDS
    from cm_gym.domains.registry import get_benchmark
    from cm_gym.memory import defaults

    assert MIN_USEFUL_RECORDS == MIN_DEFAULT_RECORDS == 10
    monkeypatch.setattr(defaults, "_WARNED", set())
    spec = get_benchmark("QuixBugs")
    with caplog.at_level(logging.WARNING):
        defaults._warn_default_store(spec, tmp_path / "full.sqlite", MIN_USEFUL_RECORDS, 10)
        assert caplog.records == []
        for _ in range(3):  # a vector env's or a sweep's repeated gym.make
            defaults._warn_default_store(spec, tmp_path / "empty.sqlite", 0, 10)
    assert len(caplog.records) == 1
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.WARNING and "\n" not in message
    assert "the default QuixBugs store holds only 0 record(s) from 10 build task(s)" in message
    assert "docs/domains/code.md" in message and "cm-gym build --benchmark QuixBugs" in message
    for spec_name in ("Dafny", "MiniF2F", "CodeHumanEvalSynth", "SQL"):  # every built-in has a page
        page = defaults.DOCS_PAGES[get_benchmark(spec_name).domain_name]
        assert (REPO / page).is_file()


PLUGIN_STORE = """
import gymnasium as gym
import cm_gym_ranges
cm_gym_ranges.register()
from cm_gym.memory.defaults import default_snapshot
from cm_gym.memory.snapshot import FrozenStore
store = FrozenStore.open(default_snapshot("Ranges"))
print("KEYS", " ".join(sorted({r.contrast_key for r in store.records})))
env = gym.make("cm_gym_ranges/Ranges-v0", tasks="eval")
decisions = retrieved = 0
for seed in range(30):
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        decisions += 1
        retrieved += bool(info["action_mask"][1:].any())
        obs, reward, term, trunc, info = env.step(0)
        done = term or trunc
print("RECORDS", len(store.records), "RETRIEVED", retrieved, "OF", decisions)
"""


@pytest.mark.slow
def test_the_example_plugin_store_has_a_record_for_every_slip_family(tmp_path: Path) -> None:
    """The example plugin's default store: one verified record (or more) per slip family of its
    error model, retrieved at most held-out decisions (before issue 26: 1 record)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(REPO / "examples" / "cm_gym_ranges"), str(REPO))),  # this tree
        "CM_GYM_CACHE": str(tmp_path / "cache"),
        "CM_GYM_PROGRESS": "0",
    }
    out = subprocess.run(
        [sys.executable, "-c", PLUGIN_STORE],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    keys = next(line for line in out.stdout.splitlines() if line.startswith("KEYS")).split()[1:]
    assert set(keys) >= {"start:+1", "stop:+1", "stop:-1", "step:added"}
    _, records, _, retrieved, _, decisions = out.stdout.splitlines()[-1].split()
    assert int(records) >= 6  # one per slip family (docs/tutorials/add-benchmark.md)
    assert int(retrieved) > 0.5 * int(decisions)
    # under MIN_USEFUL_RECORDS (10) it says so, in one line, once for the make and the snapshot
    assert out.stderr.count("holds only") == (int(records) < MIN_USEFUL_RECORDS)


@pytest.mark.slow
def test_quick_default_store_is_a_separate_smaller_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from cm_gym.core.quick import DEFAULT_STORE_N_BUILD
    from cm_gym.memory.defaults import default_snapshot

    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path))
    monkeypatch.setenv("CM_GYM_PROGRESS", "0")
    monkeypatch.setenv("CM_GYM_QUICK", "1")
    with caplog.at_level(logging.INFO, logger="cm_gym.memory.defaults"):
        quick = default_snapshot("SQL")
    assert f"from {DEFAULT_STORE_N_BUILD} tasks" in caplog.text
    assert default_snapshot("SQL", n_build=DEFAULT_STORE_N_BUILD) == quick  # the same settings, the same file
    monkeypatch.delenv("CM_GYM_QUICK")
    assert default_snapshot("SQL", n_build=10) != quick
