"""The opt-in extended observation (beyond the paper): per-slot 'applies' and 'shown before'."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cm_gym.agents.masked_dqn import MaskedDQN
from cm_gym.envs import features as F
from cm_gym.envs._loading import EnvConfigError
from cm_gym.envs.selection import MemorySelectionEnv
from tests.envs.toy_env import TOY_BENCHMARK
from tests.toy_domain import ToyDomain

INCLUSIVE = "toy-004"


def make(store: Path, **kw: object) -> MemorySelectionEnv:
    kw.setdefault("tasks", "all")
    return MemorySelectionEnv(benchmark=TOY_BENCHMARK, store=store, **kw)


def test_extended_observation_appends_applies_and_shown_before(toy_store_path: Path) -> None:
    paper, ext = make(toy_store_path), make(toy_store_path, obs_layout="extended", use_conditions=False)
    assert paper.observation_space.shape == (98,) and ext.observation_space.shape == (106,)
    obs, info = ext.reset(options={"task_id": INCLUSIVE})
    assert ext.observation_space.contains(obs)
    assert F.mask_from_observation(obs).tolist() == info["action_mask"].tolist()  # same validity
    domain, draft = ToyDomain(), info["next_draft"]
    records = [ext.store.get(rid) for rid in info["retrieved_ids"]]
    for j, rec in enumerate(records, start=1):
        applies, shown = obs[F.extra_slot(j)]
        task = next(t for t in ext.tasks if t.task_id == INCLUSIVE)
        assert bool(applies) == domain.record_applies(task, draft, rec.a_minus, rec.a_plus)
        assert shown == 0.0
    assert not obs[F.EXTRA][2 * len(records) :].any()  # unused slots are zero
    described = F.describe(obs)["slots"][0]
    assert set(F.EXTRA_SLOT_FEATURES) <= set(described)
    # use the opposite advice (it leaves this wrong draft wrong); it is then "shown before"
    j_used = next(j for j, r in enumerate(records, start=1) if r.a_minus.startswith("x >="))
    used = records[j_used - 1].record_id
    obs2, _, terminated, _, info2 = ext.step(j_used)
    if terminated:
        pytest.skip("the first use solved the task")
    for j, rid in enumerate(info2["retrieved_ids"], start=1):
        assert obs2[F.extra_slot(j)][1] == float(rid == used)
    # the paper layout is the first 98 dims of the extended one
    pobs, _ = paper.reset(options={"task_id": INCLUSIVE})
    assert pobs.shape == (98,)
    with pytest.raises(EnvConfigError, match="obs_layout"):
        make(toy_store_path, obs_layout="wide")


def test_a_checkpoint_refuses_the_other_layout(toy_store_path: Path, tmp_path: Path) -> None:
    model = MaskedDQN("MlpPolicy", make(toy_store_path), seed=0, learning_starts=10)
    model.save(tmp_path / "paper.zip")
    with pytest.raises(F.ObservationLayoutError, match="paper layout.*extended layout"):
        MaskedDQN.load(tmp_path / "paper.zip", env=make(toy_store_path, obs_layout="extended"))
    obs = np.zeros(F.OBS_DIM_EXTENDED, dtype=np.float32)
    assert F.layout_of(obs.shape[0]) == "extended" and F.obs_dim("paper") == 98


def test_extended_env_passes_the_env_checkers(toy_store_path: Path) -> None:
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    check_env(make(toy_store_path, obs_layout="extended"), skip_render_check=True)
    sb3_check_env(make(toy_store_path, obs_layout="extended"), warn=False)
