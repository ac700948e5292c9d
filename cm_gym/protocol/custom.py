"""Policy sources for the protocol: ``[NAME=]package.module:attribute`` names, objects with SB3's
``predict``, factories ``make_policy(env, seed)`` (see `cm_gym.protocol.evaluation`), and the warning for a
policy that picked masked actions. The protocol's evaluation and `evaluate_policies` share them."""

from __future__ import annotations

import importlib
import inspect
import logging
import warnings
from typing import Any

from cm_gym.protocol.config import ProtocolError

logger = logging.getLogger(__name__)

ON_MASKED = ("warn", "error")


def load_policy(text: str) -> tuple[str, Any]:
    """``[NAME=]package.module:attribute`` → (name, the object). The name defaults to the
    attribute's last component."""
    name, sep, target = text.partition("=")
    if not sep:
        name, target = "", text
    module_name, colon, attr = target.partition(":")
    if not colon or not module_name or not attr:
        raise ProtocolError(
            f"--policy {text!r}: expected [NAME=]package.module:attribute, e.g. mine=my_pkg.policies:make"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProtocolError(f"--policy {text!r}: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ProtocolError(f"--policy {text!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not hasattr(obj, "predict") and not callable(obj):
        raise ProtocolError(f"--policy {text!r}: {attr} is neither a policy (with predict) nor a factory")
    return (name or attr.split(".")[-1]), obj


def instantiate_policy(name: str, source: Any, env: Any, seed: int) -> Any:
    """The policy for one seed: `source` itself when it has ``predict``, else ``source(env, seed)``
    (passing only the arguments its signature names)."""
    if hasattr(source, "predict"):
        return source
    if not callable(source):
        raise ProtocolError(
            f"policy {name!r}: expected an object with predict() or a factory, got {type(source).__name__}"
        )
    try:
        params = inspect.signature(source).parameters
    except (TypeError, ValueError):
        params = {}
    kwargs = {k: v for k, v in (("env", env), ("seed", seed)) if k in params}
    policy = source(**kwargs) if kwargs or not params else source(env, seed)
    if not hasattr(policy, "predict"):
        raise ProtocolError(
            f"policy {name!r}: the factory returned {type(policy).__name__}, which has no predict()"
        )
    return policy


def report_masked(name: str, masked: int, decisions: int) -> None:
    """The loud warning for a policy that picked masked actions (they ran as skip)."""
    if masked:
        text = (
            f"policy {name!r} picked a masked action {masked} time(s) in {decisions} decisions; they ran as "
            "skip (pass it the masks, or on_masked='error' / --on-masked error to refuse)"
        )
        warnings.warn(text, RuntimeWarning, stacklevel=3)
        logger.warning(text)
