"""Train a memory selector with Stable-Baselines3 in ten lines, and put it in the results table.

Run: python examples/train_selector_sb3.py  (see docs/tutorials/train-sb3.md)
"""

import gymnasium as gym
import torch

import cm_gym  # registers the cm_gym/... env ids
from cm_gym.agents import MaskedDQN  # SB3's DQN with action masking, the paper's Table 3 settings
from cm_gym.protocol.report import results_table
from cm_gym.protocol.training import DecisionProgress  # a progress bar (lines when piped to a file)

torch.set_num_threads(1)  # a (64, 64) MLP: extra threads only wait on small machines
env = gym.make("cm_gym/SQL-v0")  # the default frozen store, training tasks, simulated LLM
model = MaskedDQN("MlpPolicy", env, seed=0, tensorboard_log="runs/sb3-tutorial/tensorboard")
model.learn(total_timesteps=2_000, callback=DecisionProgress())
model.save("runs/sb3-tutorial/selector.zip")  # runs/ is where outputs go (and git ignores it)

results = cm_gym.evaluate_policies({"my DQN": model}, baselines=("none", "top1", "random"))
print(results_table(results))
