"""cm_gym.envs"""
