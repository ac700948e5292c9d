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
