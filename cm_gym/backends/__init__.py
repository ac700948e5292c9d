"""Optional execution backends (Ray): they plug into the protocol and the experiment runner
through named plugins (`cm_gym.core.plugins`); nothing below imports them."""
