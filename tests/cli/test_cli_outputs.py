"""The CLI surface and what it writes: help and choices everywhere, one-line errors for bad seeds
and sizes, train → evaluate with the seeds of training.json, your policy in the table, a table that
fits 100 columns (+ Markdown / JSON), results.json provenance, refused reruns, TensorBoard points."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cm_gym.cli import main, make_parser
from cm_gym.cli._args import OPTIONS
from cm_gym.protocol import ProtocolConfig, ProtocolError
from cm_gym.protocol.report import results_table

REPO = Path(__file__).resolve().parents[2]


def test_every_command_and_option_has_help_and_every_config_field_a_description() -> None:
    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append(" ".join([*path, name]))
                    walk(sub, [*path, name])
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(" ".join([*path, *(action.option_strings or [action.dest])]))

    walk(make_parser(), [])
    assert missing == []
    fields = {
        f.name for f in dataclasses.fields(ProtocolConfig) if f.name not in ("env_kwargs", "custom_policies")
    }
    assert fields <= set(OPTIONS), f"add help for {sorted(fields - set(OPTIONS))} in cm_gym/cli/_args.py"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--seeds", "-1"], "argument --seeds: must be >= 0, got -1"),
        (["run", "--total-decisions", "0"], "argument --total-decisions: must be >= 1, got 0"),
        (["train", "--n-eval", "x"], "argument --n-eval: expected an integer"),
        (["evaluate", "--k", "5"], "argument --k: must be in 0..4"),
        (["run", "--agent", "cot"], "argument --agent: invalid choice"),
        (["run", "--benchmark", "Nope"], "unknown benchmark 'Nope'"),
        (["evaluate", "--store", "/no/such.sqlite"], "no such file"),
        (["check-domain", "SQL", "--max-tasks", "0"], "must be >= 1"),
    ],
)
def test_bad_values_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and message in err[-1]


def test_the_python_api_validates_too() -> None:
    for kw, match in (
        ({"seeds": (-1,)}, "seeds"),
        ({"seeds": (0, 0)}, "distinct"),
        ({"total_decisions": 0}, "total_decisions"),
    ):
        with pytest.raises(ProtocolError, match=match):
            ProtocolConfig(**kw).validate()


def _fake_results(labels: list[str]) -> dict[str, Any]:
    metric = {"mean": 83.333, "std": 1.234}
    rate = {"mean": 0.1234, "std": 0.0456}
    mean = {
        "score": metric, "total_tokens_m": {"mean": 0.3456, "std": 0.0123},
        "evaluator_calls_per_solved": {"mean": 1.87, "std": 0.12}, "failures_per_solved": {"mean": 0.87, "std": 0.1},
        "retrieval_coverage": rate, "harmful_use": rate, "worse_than_draft": rate,
    }  # fmt: skip
    return {
        "config": {"benchmark": "SQL", "seeds": [0, 1, 2]},
        "split": {"eval": 240},
        "snapshot": {"records": 41},
        "policies": {f"p{i}": {"label": label, "mean": mean} for i, label in enumerate(labels)},
    }


def test_the_table_fits_100_columns_and_has_markdown_and_json_forms() -> None:
    results = _fake_results(
        ["None (always skip)", "A rather long custom policy name from a user package", "CF"]
    )
    text = results_table(results, width=100)
    assert max(map(len, text.splitlines())) <= 100 and "83.3 ± 1.2" in text
    markdown = results_table(results, "markdown").splitlines()
    assert markdown[0].startswith("| Policy | Score |") and markdown[1].startswith("|---|")
    data = json.loads(results_table(results, "json"))
    assert [r["policy"] for r in data["rows"]] == ["p0", "p1", "p2"] and data["rows"][0]["score"][
        "std"
    ] == 1.234


def test_short_headers_name_their_denominator_not_seconds() -> None:
    """Shortened to fit, "Calls/solved" must not become "Calls/s" (read as calls per second)."""
    from cm_gym.protocol.report import SHORT

    results = _fake_results(["A rather long custom policy name from a user package"] * 2)
    text = results_table(results, width=100)
    header = text.splitlines()[0].split()
    assert (
        "Calls/sol" in header
        and "Fails/sol" in header
        and "Calls/sol = Calls/solved" in " ".join(text.split())
    )
    assert not [h for h in SHORT.values() if h.endswith("/s")]
    data = json.loads(results_table(results, "json"))  # results.json / JSON keys are unchanged
    assert data["rows"][0]["evaluator_calls_per_solved"]["header"] == "Calls/solved"


def _tags(folder: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


SMALL = ["--benchmark", "SQL", "--n-build", "30", "--n-train", "20", "--n-eval", "12", "--seeds", "0", "1"]
SMALL += ["--total-decisions", "120", "--checkpoint-every", "60", "--no-progress"]  # learning starts at 100


@pytest.mark.slow
def test_train_then_evaluate_with_training_seeds_custom_policy_and_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["train", *SMALL, "--out-dir", str(out)]) == 0
    record = json.loads((out / "training.json").read_text())
    assert record["provenance"]["splits"]["eval"]["tasks"] == 12
    tb = out / "tensorboard"
    runs = ["extended/seed0_1", "extended/seed1_1", "paper/seed0_1", "paper/seed1_1"]  # a folder per layout
    assert sorted(p.relative_to(tb).as_posix() for p in tb.glob("*/*")) == runs
    sys.path.insert(0, str(REPO))
    from train import TENSORBOARD_TAGS  # the tags train.py's docstring names

    dqn_tags = {t for t in TENSORBOARD_TAGS if not t.startswith("selector/")}  # selector/: the zoo's
    for run in tb.glob("*/*"):
        tags = _tags(run)
        assert dqn_tags <= set(tags), sorted(dqn_tags - set(tags))
        assert tags["charts/validation_return"] == [60, 120]  # every validation point, the last one too

    capsys.readouterr()
    assert main(["train", *SMALL, "--out-dir", str(out)]) == 2
    assert "already holds training.json" in capsys.readouterr().err

    policy = "mine=tests.policy_fixtures:make_policy"
    capsys.readouterr()
    assert main(["evaluate", "--out-dir", str(out), "--policy", policy, "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["seeds"] == [0, 1] and [r["policy"] for r in table["rows"]][-1] == "mine"
    results = json.loads((out / "results.json").read_text())
    assert len(results["policies"]["cf_memory"]["per_seed"]) == 2 and results["config"]["n_eval"] == 12
    prov = results["provenance"]
    assert prov["cm_gym"] and "evaluate" in prov["command"] and prov["libraries"]["gymnasium"]
    assert (
        set(prov["splits"]) == {"build", "train", "validation", "eval"}
        and len(prov["splits"]["eval"]["sha256"]) == 64
    )
    assert {p.name for p in out.glob("*.png")} == {"score.png", "tokens.png", "learning_curve.png"}
    assert main(["evaluate", "--out-dir", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["evaluate", "--out-dir", str(out), "--seeds", "3", "--overwrite"]) == 2
    assert "no selector for seed(s) [3]" in capsys.readouterr().err
    (tb / "paper" / "seed0_1" / "stale").write_text("x")
    assert main(["train", *SMALL[:-7], "0", *SMALL[-5:], "--out-dir", str(out), "--overwrite"]) == 0
    assert sorted(p.relative_to(tb).as_posix() for p in tb.glob("*/*")) == [
        "extended/seed0_1",
        "paper/seed0_1",
    ]
    assert not (tb / "paper" / "seed0_1" / "stale").exists()
    assert not (out / "results.json").exists() and not (out / "selector" / "seed1").exists()


def test_a_seed_retrained_in_place_replaces_its_tensorboard_run(tmp_path: Path) -> None:
    from cm_gym.protocol.outputs import remove_tensorboard_runs

    for name in ("seed0_1", "seed0_2", "seed1_1", "seed0_x", "seed10_1"):
        (tmp_path / name).mkdir()
    remove_tensorboard_runs(tmp_path, "seed0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed0_x", "seed10_1", "seed1_1"]
