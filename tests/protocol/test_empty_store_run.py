"""Issue 36: a run whose store holds 0 records trains no selector (every action but skip is masked
at every decision, so every policy equals None) and says so in one line above a None-only table,
instead of a DQN's minutes and three tables of identical rows with +0.0 [+0.0, +0.0]. results.json
keeps its shape: every policy, CF Memory per layout (always-skip), with the reason recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.memory.store import RecordStore
from cm_gym.protocol import ProtocolConfig, run_protocol
from cm_gym.protocol.report import results_table
from tests.envs.toy_env import TOY_BENCHMARK


@pytest.fixture(scope="module")
def empty_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProtocolConfig, dict]:
    folder = tmp_path_factory.mktemp("empty-store")
    with RecordStore(folder / "live.sqlite", domain="toycmp", benchmark=TOY_BENCHMARK) as store:
        store.freeze(folder / "empty.sqlite")
    cfg = ProtocolConfig(
        benchmark=TOY_BENCHMARK, store=folder / "empty.sqlite", out_dir=folder / "run", seeds=(0, 1),
        n_train=8, n_eval=8, total_decisions=50, checkpoint_every=25, progress=False,
    )  # fmt: skip
    return cfg, run_protocol(cfg)


def test_an_empty_store_trains_no_selector_and_every_policy_equals_none(empty_run: tuple) -> None:
    cfg, results = empty_run
    assert results["training"] == [] and "0 records" in results["training_skipped_reason"]
    assert not (cfg.out_dir / "selector").exists() and not (cfg.out_dir / "tensorboard").exists()
    on_disk = json.loads((cfg.out_dir / "results.json").read_text())
    assert set(on_disk["policies"]) == {"none", "top1", "random", "cf_memory", "cf_memory_extended", "oracle"}
    none = on_disk["policies"]["none"]["mean"]["score"]["mean"]
    for name, res in on_disk["policies"].items():
        assert res["mean"]["score"]["mean"] == pytest.approx(none), name
        assert len(res["per_seed"]) == 2
    for name in ("cf_memory", "cf_memory_extended"):
        assert "0 records" in on_disk["policies"][name]["untrained_reason"]
    assert "untrained_reason" not in on_disk["policies"]["random"]


def test_the_table_of_an_empty_store_is_one_line_and_the_none_row(empty_run: tuple) -> None:
    _, results = empty_run
    text = results_table(results, width=100)
    lines = text.splitlines()
    assert lines[0] == (
        "The store holds 0 records: every policy equals None and no selector was trained (None shown alone)."
    )
    assert lines[2].startswith("Policy") and lines[4].startswith("None") and lines[5] == ""
    assert "+0.0 [+0.0, +0.0]" not in text and "Score difference" not in text
    assert max(map(len, lines)) <= 100
    markdown = results_table(results, "markdown")
    assert markdown.startswith("The store holds 0 records") and markdown.count("| None") == 1
    data = json.loads(results_table(results, "json"))  # the machine-readable form keeps every row
    assert len(data["rows"]) == 6 and data["store_records"] == 0


def test_cm_gym_train_on_an_empty_store_trains_nothing_and_evaluate_reads_that(
    empty_run: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cm-gym train` skips training as `cm-gym run` does (one line, no selector/, no TensorBoard
    runs), and `cm-gym evaluate` on its training.json scores CF Memory as always-skip under the
    empty-store line instead of refusing for want of checkpoints."""
    from cm_gym.cli import main
    from cm_gym.cli.train import TRAINED_NOTHING

    cfg, _ = empty_run
    out = tmp_path / "train"
    sizes = ["--n-train", "8", "--n-eval", "8", "--total-decisions", "50", "--checkpoint-every", "25"]
    argv = ["train", "--benchmark", TOY_BENCHMARK, "--store", str(cfg.store), "--seeds", "0", "1"]
    assert main([*argv, *sizes, "--no-progress", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert TRAINED_NOTHING in printed and "best checkpoint" not in printed
    record = json.loads((out / "training.json").read_text())
    assert record["training"] == [] and "0 records" in record["training_skipped_reason"]
    assert not (out / "selector").exists() and not (out / "tensorboard").exists()

    assert main(["evaluate", "--out-dir", str(out), "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("The store holds 0 records: every policy equals None and no selector was trained")
    results = json.loads((out / "results.json").read_text())
    assert "0 records" in results["policies"]["cf_memory"]["untrained_reason"]
    assert "0 records" in results["training_skipped_reason"]
