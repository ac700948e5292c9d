"""cm_gym.evaluators"""
