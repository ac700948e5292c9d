"""`cm-gym diagnose`: its statistics on hand-made decisions, and one small real run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cm_gym.envs.features import OBS_DIM
from cm_gym.studies.analysis.diagnose import (
    DiagnoseConfig,
    diagnose_table,
    feature_aucs,
    headroom,
    run_diagnose,
    slot_stats,
)
from cm_gym.studies.analysis.peeked import SLOT_FEATURE_NAMES, PeekedDecision, SlotOutcome


def _slot(j: int, score: float, changed: bool, applies: float) -> SlotOutcome:
    feats = {name: 0.0 for name in SLOT_FEATURE_NAMES}
    feats.update(applies=applies, slot_index=float(j), relevance=1.0 - 0.1 * j)
    return SlotOutcome(j, f"r{j}", score, score == 1.0, changed, feats)


def _decision(skip: float, *slots: SlotOutcome) -> PeekedDecision:
    return PeekedDecision("t", 0, np.zeros(OBS_DIM, np.float32), skip, skip == 1.0, tuple(slots))


def test_headroom_slot_shares_and_aucs_on_known_decisions() -> None:
    decisions = [
        _decision(1.0, _slot(1, 0.0, True, 0.0), _slot(2, 0.0, True, 0.0)),  # skip unique best
        _decision(0.0, _slot(1, 1.0, True, 1.0), _slot(2, 0.0, False, 0.0)),  # slot 1 helps
        _decision(0.0, _slot(1, 0.0, False, 0.0), _slot(2, 0.0, False, 0.0)),  # every option ties
        _decision(0.0),  # nothing retrieved: not counted in the shares
    ]
    h = headroom(decisions)
    assert h["decisions"] == 4 and h["decisions_with_slots"] == 3
    assert h["skip_unique_best"] == pytest.approx(1 / 3)
    assert h["some_slot_beats_skip"] == pytest.approx(1 / 3) and h["all_options_tie"] == pytest.approx(1 / 3)
    rows = {r["slot"]: r for r in slot_stats(decisions)}
    assert rows[1]["uses"] == 3 and rows[1]["no_op"] == pytest.approx(1 / 3)
    assert rows[1]["harmful"] == pytest.approx(1 / 3) and rows[1]["helpful"] == pytest.approx(1 / 3)
    assert rows[2]["helpful"] == 0.0 and rows["all"]["uses"] == 6
    aucs = feature_aucs(decisions)
    assert aucs["applies"] == 1.0  # the one helpful use is the one whose edit applies
    assert aucs["delta"] == 0.5 and aucs["shown_before"] == 0.5  # constant features carry nothing


@pytest.mark.slow
def test_a_small_diagnosis_runs_end_to_end(tmp_path: Path) -> None:
    cfg = DiagnoseConfig(
        benchmark="SQL",
        out_dir=tmp_path,
        n_build=40,
        n_train=16,
        n_eval=16,
        train_selector=False,
        progress=False,
    )
    result = run_diagnose(cfg)
    assert (tmp_path / "diagnose.json").is_file()
    scores = {k: v["score"] for k, v in result["scores"].items()}
    assert set(scores) == {"none", "top1", "random", "supervised", "oracle"}  # no selector trained
    assert scores["oracle"] >= max(scores["none"], scores["top1"])  # the oracle peeks
    assert result["oracle_minus_random"] == pytest.approx(scores["oracle"] - scores["random"])
    h = result["headroom_eval"]
    assert h["decisions"] >= 16 and 0.0 <= h["skip_unique_best"] <= 1.0
    assert sum(r["uses"] for r in result["slots"] if r["slot"] != "all") == result["slots"][-1]["uses"]
    table = diagnose_table(result)
    assert "skip is the unique best" in table and "supervised bound" in table


def test_peeked_classifier_fits_and_predicts_on_one_openmp_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenMP barriers on a shared machine made the classifier take half an hour: it must run on
    one thread (checked inside sklearn's fit and predict_proba)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_info

    from cm_gym.studies.analysis.supervised import PeekedClassifier

    seen: list[int] = []

    def openmp_threads() -> None:
        seen.extend(int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "openmp")

    fit, proba = HistGradientBoostingClassifier.fit, HistGradientBoostingClassifier.predict_proba

    def spy_fit(self, X, y, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        openmp_threads()
        return fit(self, X, y, *a, **k)

    def spy_proba(self, X):  # noqa: ANN001, ANN202
        openmp_threads()
        return proba(self, X)

    monkeypatch.setattr(HistGradientBoostingClassifier, "fit", spy_fit)
    monkeypatch.setattr(HistGradientBoostingClassifier, "predict_proba", spy_proba)
    rng = np.random.default_rng(0)
    decisions = [
        _decision(
            float(rng.random() < 0.5),
            _slot(1, float(rng.random() < 0.5), True, 1.0),
            _slot(2, 0.0, False, 0.0),
        )
        for _ in range(40)
    ]
    clf = PeekedClassifier().fit(decisions)
    assert clf.model is not None
    action, _ = clf.predict(np.ones(OBS_DIM, np.float32))
    assert 0 <= int(action) <= 2
    if not seen:
        pytest.skip("no OpenMP runtime loaded by scikit-learn here")
    assert seen and all(n == 1 for n in seen), seen


def test_diagnose_on_an_empty_store_trains_no_selector_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: with 0 records every action but skip is masked; `--train-selector` (the default)
    trains nothing there and the table says why instead of a masked-DQN row equal to skip."""
    import cm_gym.protocol
    from cm_gym.memory.store import RecordStore
    from cm_gym.studies.analysis.diagnose import UNTRAINED_NOTE

    with RecordStore(tmp_path / "live.sqlite", domain="sql", benchmark="SQL") as store:
        store.freeze(tmp_path / "empty.sqlite")

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a selector was trained on an empty store")

    monkeypatch.setattr(cm_gym.protocol, "train_selector", no_training)
    cfg = DiagnoseConfig(
        benchmark="SQL", out_dir=tmp_path / "out", store=tmp_path / "empty.sqlite", n_train=8, n_eval=8,
        total_decisions=50, progress=False,
    )  # fmt: skip
    result = run_diagnose(cfg)
    assert result["selector_untrained"] and "cf_memory" not in result["scores"]
    assert UNTRAINED_NOTE in diagnose_table(result).splitlines()
