"""cm_gym.agents"""
