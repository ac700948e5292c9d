"""cm_gym.wrappers"""
