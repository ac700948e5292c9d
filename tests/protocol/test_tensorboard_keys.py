"""TensorBoard as a documented output: the keys the training callback writes, the keys train.py
names and the keys docs/tensorboard.md explains are the same set; one folder per layout."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

from cm_gym.envs.metrics import EpisodeCounters
from cm_gym.protocol.selector import tensorboard_run
from cm_gym.protocol.training import CheckpointSelector

REPO = Path(__file__).resolve().parents[2]
OWN_GROUPS = ("charts/", "memory/", "llm/")


class _Logger:
    def __init__(self) -> None:
        self.means: dict[str, list[float]] = {}

    def record_mean(self, key: str, value: float) -> None:
        self.means.setdefault(key, []).append(float(value))


def _tags() -> tuple[str, ...]:
    sys.path.insert(0, str(REPO))
    try:
        from train import TENSORBOARD_TAGS
    finally:
        sys.path.remove(str(REPO))
    return TENSORBOARD_TAGS


def test_an_episode_logs_helpful_beside_harmful_uses() -> None:
    callback = CheckpointSelector(val_env=None, val_task_ids=[], out_dir=Path("unused"))  # type: ignore[arg-type]
    log = _Logger()
    callback.model = SimpleNamespace(logger=log)  # type: ignore[assignment]
    episode = EpisodeCounters(selected_uses=3, helpful_uses=2, harmful_uses=1, retrieval_opportunities=3)
    callback._log_episode(episode)
    assert log.means["memory/helpful_uses"] == [2.0] and log.means["memory/harmful_uses"] == [1.0]
    assert log.means["memory/selected_uses"] == [3.0]
    own = {t for t in _tags() if t.startswith(OWN_GROUPS) and not t.startswith("charts/validation")}
    assert set(log.means) == own  # every per-episode key documented, none undocumented


def test_every_key_is_explained_on_the_tensorboard_page() -> None:
    page = (REPO / "docs" / "tensorboard.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_]+/[a-z_]+)` \|", page, flags=re.M))
    assert documented == set(_tags())
    assert "tensorboard --logdir runs/SQL/tensorboard" in page
    assert "tensorboard.md" in (REPO / "mkdocs.yml").read_text()
    assert "docs/tensorboard.md" in (REPO / "README.md").read_text()


def test_each_layout_logs_to_its_own_folder(tmp_path: Path) -> None:
    assert tensorboard_run(tmp_path, "paper", 3) == (str(tmp_path / "tensorboard" / "paper"), "seed3")
    assert tensorboard_run(tmp_path, "extended", 0) == (str(tmp_path / "tensorboard" / "extended"), "seed0")


def test_learned_selectors_log_what_they_learned(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from cm_gym.protocol.config import ProtocolConfig
    from cm_gym.protocol.zoo import SELECTOR_SCALARS, log_selector_stats

    documented = {t for t in _tags() if t.startswith("selector/")}
    assert documented == {f"selector/{k}" for k in SELECTOR_SCALARS} | {"selector/q"}
    cfg = ProtocolConfig(benchmark="SQL", out_dir=tmp_path)
    record = {"decisions": 40, "train_solved_rate": 0.5, "records_updated": 2, "q_mean": -0.25,
              "null_actions": 3, "exploration": {"epsilon": 0.1}, "q": {"r1": -0.5, "r2": 0.0}}  # fmt: skip
    for _ in range(2):  # a rerun replaces the seed's log instead of adding a second
        log_selector_stats(cfg, "memrl", 1, record)
    run = tmp_path / "tensorboard" / "memrl" / "seed1"
    assert len(list(run.iterdir())) == 1
    events = EventAccumulator(str(run)).Reload()
    scalars = {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}
    assert set(scalars) == {"selector/train_solved_rate", "selector/records_updated", "selector/q_mean",
                            "selector/null_actions"}  # fmt: skip
    assert [(e.step, e.value) for e in scalars["selector/q_mean"]] == [(40, -0.25)]
    assert events.Tags()["histograms"] == ["selector/q"]
