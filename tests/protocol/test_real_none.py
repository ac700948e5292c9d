"""None on real drafts is one system retried (issue 32): on GPT-4 zero-shot's published Spider SQL
the memory-free policy's budget score equals its first-decision score (a frozen model asked again
gives the same answer); the ladder of stronger systems is its own, named row ("Cascade"), with the
same first decision; results.json says which split and what the store's records are made of."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cm_gym.protocol import ProtocolConfig, run_protocol
from cm_gym.protocol.config import CASCADE_LABEL

pytestmark = [pytest.mark.data, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from cm_gym.core.paths import DataNotFoundError, data_root

    try:
        data_root()
    except DataNotFoundError as exc:
        pytest.skip(str(exc))
    out: dict[str, dict[str, Any]] = {}
    for name, llm in (("plain", "recorded:gpt-4-zero-shot"), ("cascade", "recorded:gpt-4-zero-shot+cascade")):
        cfg = ProtocolConfig(
            benchmark="SpiderSQL", llm=llm, out_dir=tmp_path_factory.mktemp(name), seeds=(0,),
            policies=("none",), n_build=40, n_eval=80, tensorboard=False, progress=False,
        )  # fmt: skip
        out[name] = run_protocol(cfg)
    return out


def _none(results: dict[str, Any], key: str) -> float:
    return float(results["policies"]["none"]["mean"][key]["mean"])


def test_none_is_the_same_system_retried_and_the_cascade_is_its_own_row(runs: dict[str, Any]) -> None:
    plain, cascade = runs["plain"], runs["cascade"]
    assert _none(plain, "score") == _none(plain, "first_decision_score")  # the same SQL again
    assert _none(cascade, "first_decision_score") == _none(plain, "first_decision_score")
    assert _none(cascade, "score") > _none(cascade, "first_decision_score")  # stronger systems' later drafts
    assert plain["policies"]["none"]["label"].startswith("None")
    assert cascade["policies"]["none"]["label"] == CASCADE_LABEL
    assert plain["recorded"]["cascade"] is False and plain["recorded"]["ladder"] == ["gpt-4-zero-shot"]
    assert cascade["recorded"]["cascade"] is True and cascade["recorded"]["ladder"][1] == "gpt-4-few-shot"
    systems = plain["policies"]["none"]["replies"]["real_by_system"]
    assert set(systems) == {"gpt-4-zero-shot"}
    assert "gpt-4-few-shot" in cascade["policies"]["none"]["replies"]["real_by_system"]


def test_results_name_the_split_and_the_records_provenance(runs: dict[str, Any]) -> None:
    for results in runs.values():
        assert results["split"]["kind"] == "sampled" and "App. D.2" in results["split"]["label"]
        assert results["split"]["eval"] == 80 and results["split"]["seed"] == 12345
        provenance = results["snapshot"]["provenance"]
        assert set(provenance["a_minus"]) <= {"real"}  # real drafts admit only real a⁻
        assert sum(provenance["a_minus"].values()) == results["snapshot"]["records"]
    assert runs["plain"]["snapshot"]["records"] >= 0
    assert Path(runs["plain"]["snapshot"]["path"]).is_file()
