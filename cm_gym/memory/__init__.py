"""cm_gym.memory"""
